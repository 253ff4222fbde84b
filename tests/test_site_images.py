"""The gallery's pictures (docs/_ext/effpt_site/images.py): resized once, offered by width,
decorative ones keep their empty alt.
"""

from __future__ import annotations

from effpt_site import images

# -- images and cards ----------------------------------------------------------------------


def test_img_tag_offers_candidates_by_width():
    tag = images.img_tag(
        [("a.png", 640), ("a_2x.png", 1280), ("a_75w.png", 960)],
        0.75,
        640,
        sizes=images.sizes_for(640),
        alt='a "plot"',
    )
    assert 'srcset="a.png 640w, a_75w.png 960w, a_2x.png 1280w"' in tag
    assert 'src="a.png"' in tag
    assert 'width="640" height="480"' in tag
    assert 'loading="lazy"' in tag
    assert 'alt="a &quot;plot&quot;"' in tag


def test_a_decorative_picture_keeps_its_empty_alt():
    tag = images.img_tag([("t.png", 160)], 0.7, 160, sizes="160px", alt="")
    assert 'alt=""' in tag
    assert 'class="' not in tag


def test_resized_writes_once(tmp_path):
    from PIL import Image

    source = tmp_path / "thumb.png"
    Image.new("RGB", (400, 280), "white").save(source)
    assert images.resized(source, tmp_path / "small.png", 160) == (160, 112)
    assert images.resized(source, tmp_path / "small.png", 160) == (160, 112)


def test_a_resized_picture_is_shared_by_the_editions_and_made_again_when_its_input_changes(
    tmp_path, monkeypatch
):
    from PIL import Image

    made = []
    real = Image.Image.resize
    monkeypatch.setattr(
        Image.Image, "resize", lambda self, *a, **k: made.append(a[0]) or real(self, *a, **k)
    )
    shared = tmp_path / "shared"
    source = tmp_path / "thumb.png"
    Image.new("RGB", (400, 280), "white").save(source)
    english, chinese = tmp_path / "en" / "t_160w.png", tmp_path / "zh" / "t_160w.png"
    assert images.resized(source, english, 160, shared) == (160, 112)
    assert images.resized(source, chinese, 160, shared) == (160, 112)
    assert made == [(160, 112)]  # the second edition copied the first one's file
    assert chinese.read_bytes() == english.read_bytes()
    # Another width, or the same name with other pixels, is made again.
    assert images.resized(source, tmp_path / "zh" / "t_320w.png", 320, shared) == (320, 224)
    Image.new("RGB", (400, 200), "black").save(source)
    assert images.resized(source, tmp_path / "de" / "t_160w.png", 160, shared) == (160, 80)
    assert made == [(160, 112), (320, 224), (160, 80)]
    # A kept file that cannot be read is made again.
    for kept in shared.iterdir():
        kept.write_bytes(b"")
    assert images.resized(source, tmp_path / "fr" / "t_160w.png", 160, shared) == (160, 80)
    assert len(made) == 4


def test_a_kept_resized_file_unused_for_thirty_days_is_removed(tmp_path):
    import os
    import time
    from types import SimpleNamespace

    folder = tmp_path / "_build" / "effpt-resized"
    folder.mkdir(parents=True)
    old, recent = folder / "old.png", folder / "recent.png"
    old.write_bytes(b"x")
    recent.write_bytes(b"x")
    month = time.time() - 31 * 24 * 3600
    os.utime(old, (month, month))
    app = SimpleNamespace(
        srcdir=tmp_path, config=SimpleNamespace(effpt_resized_dir="_build/effpt-resized")
    )
    images._prune_resized(app, None)
    assert not old.exists()
    assert recent.exists()
