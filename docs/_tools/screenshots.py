"""Screenshots of the built site as a reader first sees it, for a person to look at.

Five pages, one of each kind (a page from the source material, a performance page, a
training page, the measurements page, the landing page), at a desktop width (1280 x 900)
and a 390-px phone (390 x 844, touch, as Chromium's device emulation does it), in light
and dark mode, in English and Chinese: 40 PNGs of each page's first screen, named
``<edition>-<page>-<width>-<mode>.png``. The colour mode is set the way the theme's
switch stores it (``localStorage``), before the page loads.

Usage: python screenshots.py SITE_DIR OUT_DIR [PAGE ...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from chromium import serve, webdriver
from selenium.webdriver.support.ui import WebDriverWait

PAGES = {
    "seed": "auto_examples/broadcasting/plot_broadcasting.html",
    "performance": "auto_examples/performance/plot_channels_last.html",
    "training": "auto_examples/training/plot_accumulate_gradients.html",
    "measurements": "measurements.html",
    "landing": "index.html",
}
SCREENS = {
    "desktop": {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
    "phone": {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True},
}


def shoot(driver, url: str, screen: dict, mode: str, target: Path) -> None:
    """Open ``url`` on ``screen`` in colour ``mode`` and save its first screen to ``target``."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", screen)
    driver.execute_cdp_cmd("Emulation.setTouchEmulationEnabled", {"enabled": screen["mobile"]})
    driver.get(url)
    driver.execute_script(
        "localStorage.setItem('mode', arguments[0]); localStorage.setItem('theme', arguments[0]);",
        mode,
    )
    driver.get(url)
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )
    driver.execute_script("return document.fonts.ready")
    time.sleep(0.5)
    driver.save_screenshot(str(target))


def main() -> int:
    site, out = Path(sys.argv[1]), Path(sys.argv[2])
    names = sys.argv[3:] or list(PAGES)
    out.mkdir(parents=True, exist_ok=True)
    server, base = serve(site)
    driver = webdriver(f"/tmp/effpt-chromium-{time.time_ns()}")
    try:
        for edition, prefix in (("en", ""), ("zh_CN", "zh_CN/")):
            for name in names:
                for width, screen in SCREENS.items():
                    for mode in ("light", "dark"):
                        target = out / f"{edition}-{name}-{width}-{mode}.png"
                        shoot(driver, f"{base}{prefix}{PAGES[name]}", screen, mode, target)
                        print(target, flush=True)
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
