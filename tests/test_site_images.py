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
