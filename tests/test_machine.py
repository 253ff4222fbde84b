"""effpt.machine.bfloat16_support: what decides whether bfloat16 is fast on a CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from effpt.machine import bfloat16_support

# Abridged real /proc/cpuinfo texts: an AMD Zen 4 (two processors), an AVX2-only Zen 3,
# an Arm Neoverse V1 (Features line).
ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9R14 96-Core Processor
flags\t\t: fpu vme sse4_2 avx avx2 fma avx512f avx512bw avx512vl avx512_vnni avx512_bf16
processor\t: 1
flags\t\t: fpu vme sse4_2 avx avx2 fma avx512f avx512bw avx512vl avx512_vnni avx512_bf16
"""
ZEN3 = """processor\t: 0
model name\t: AMD EPYC 7R13 Processor
flags\t\t: fpu vme sse4_2 avx avx2 fma vaes vpclmulqdq
"""
NEOVERSE = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp bf16 i8mm
"""


@pytest.mark.parametrize(
    ("text", "found"),
    [(ZEN4, ("avx512_bf16",)), (ZEN3, ()), (NEOVERSE, ("bf16",)), ("processor : 0\n", None)],
)
def test_instructions_come_from_the_flag_lines(text, found):
    assert bfloat16_support(text, onednn=True).instructions == found


def test_a_model_name_is_not_a_flag():
    text = "model name : Imaginary bf16 amx_bf16 CPU\nflags : fpu avx2\n"
    assert bfloat16_support(text, onednn=False).instructions == ()


def test_the_line_names_both_halves_and_the_unknowns():
    assert str(bfloat16_support(ZEN3, onednn=False)) == (
        "native bfloat16 instructions: none listed in /proc/cpuinfo; "
        "bfloat16 kernels: none of oneDNN's (generic fallback kernels)"
    )
    assert "unknown" in str(bfloat16_support("", onednn=True))


@pytest.mark.parametrize("bad", [b"flags : avx2", 3])
def test_cpuinfo_must_be_text(bad):
    with pytest.raises(TypeError, match="cpuinfo must be the text"):
        bfloat16_support(bad, onednn=True)


def test_onednn_must_be_a_bool():
    with pytest.raises(TypeError, match="onednn must be True, False or None, got 'yes'"):
        bfloat16_support(ZEN4, onednn="yes")


CAPPED = """
import json
from effpt.machine import bfloat16_support
s = bfloat16_support()
print(json.dumps([s.instructions, s.onednn]))
"""


def _in_process(env_extra: dict[str, str]) -> list:
    import os

    env = {**os.environ, **env_extra}
    out = subprocess.run(
        [sys.executable, "-c", CAPPED], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(
    "avx512bw"
    not in (Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""),
    reason="needs an x86 CPU with AVX-512, where oneDNN's bfloat16 path exists to be capped",
)
def test_a_capped_onednn_is_seen_although_the_cpu_lists_the_instructions():
    """The avx2 stand-in's setting: the flags stay, torch's oneDNN path goes."""
    instructions, onednn = _in_process({"ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert onednn is False
    uncapped = _in_process({})
    assert uncapped[1] is True
    assert instructions == uncapped[0]  # the CPU lists the same instructions either way
