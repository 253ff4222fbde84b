"""Image files: draw a labelled folder of them, decode them, read them as a dataset.

Pillow decodes and draws; it is imported only when an image is read or written.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from effpt._validate import check_int
from effpt.data.errors import CorruptItemError, apply_transform

#: The classes :func:`write_image_folder` draws, in label order (sorted, as folders sort).
SHAPES = ("circle", "cross", "square", "triangle")
#: File name endings :class:`ImageFolder` takes for images (compared in lower case).
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")
#: Pillow modes wider than 8 bits per channel, which decode_image refuses.
WIDE_MODES = frozenset({"I", "F", "I;16", "I;16L", "I;16B", "I;16N"})
Transform = Callable[[torch.Tensor], torch.Tensor]


def _draw_shape(shape: str, size: int, rng: np.random.Generator):  # returns a PIL image
    from PIL import Image, ImageDraw  # noqa: PLC0415  (Pillow is optional for `import effpt`)

    image = Image.fromarray(rng.integers(0, 70, size=(size, size, 3), dtype=np.uint8))
    draw = ImageDraw.Draw(image)
    r = rng.uniform(0.2, 0.4) * size
    cx, cy = rng.uniform(r, size - r, size=2)
    color = tuple(int(c) for c in rng.integers(110, 256, size=3))
    if shape == "circle":
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=color)
    elif shape == "square":
        draw.rectangle((cx - r, cy - r, cx + r, cy + r), fill=color)
    elif shape == "triangle":
        draw.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=color)
    else:
        w = max(1.0, r / 3)
        draw.rectangle((cx - r, cy - w, cx + r, cy + w), fill=color)
        draw.rectangle((cx - w, cy - r, cx + w, cy + r), fill=color)
    return image


def write_image_folder(
    root: str | Path, n_images: int, *, size: int = 32, seed: int = 0
) -> list[Path]:
    """Write ``n_images`` PNG images of random shapes as ``root/<shape>/<index>.png``.

    Each image shows one of ``SHAPES`` (circle, cross, square, triangle: its label, drawn
    at random) in a random colour, size and place on a noisy background. Returns the paths in index order.

    Examples
    --------
    >>> import tempfile
    >>> paths = write_image_folder(tempfile.mkdtemp(), 5, size=16)
    >>> len(paths), paths[0].parent.name in SHAPES, paths[0].name
    (5, True, '00000.png')
    >>> write_image_folder(tempfile.mkdtemp(), 0)
    Traceback (most recent call last):
    ...
    ValueError: n_images must be >= 1, got 0
    """
    check_int("n_images", n_images, 1)
    check_int("size", size, 8)
    check_int("seed", seed, 0)
    rng = np.random.default_rng(seed)
    paths = []
    for index in range(n_images):
        shape = SHAPES[int(rng.integers(len(SHAPES)))]
        path = Path(root) / shape / f"{index:05d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        _draw_shape(shape, size, rng).save(path)
        paths.append(path)
    return paths


def decode_image(data: bytes, where: str = "<bytes>") -> torch.Tensor:
    """Decode image bytes into a ``uint8`` tensor of shape (3, height, width).

    ``where`` names the source in the :class:`~effpt.data.CorruptItemError` raised
    for bytes that are not an image, for an image over Pillow's decompression-bomb limit
    (``PIL.Image.MAX_IMAGE_PIXELS``), and for an image with more than 8 bits per channel
    (16-bit or float), which 8-bit RGB would clip; and in the warnings Pillow raises
    while decoding (re-issued with the same category).

    Examples
    --------
    >>> decode_image(b"not a png", where="notes.txt")
    Traceback (most recent call last):
    ...
    effpt.data.errors.CorruptItemError: notes.txt: not a readable image (cannot identify image file ...)
    """
    from PIL import Image  # noqa: PLC0415  (Pillow is optional for `import effpt`)

    if not isinstance(data, (bytes, bytearray, memoryview)):
        msg = f"data must be bytes, got {type(data).__name__} (for {where})"
        raise TypeError(msg)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with Image.open(io.BytesIO(data)) as image:
                wide = image.mode if image.mode in WIDE_MODES else None
                if wide is None:  # convert("RGB") would clip a wide mode to 0..255
                    pixels = np.array(image.convert("RGB"))  # (height, width, 3), a copy
        except Image.DecompressionBombError as exc:
            msg = f"{where}: over Pillow's limit of PIL.Image.MAX_IMAGE_PIXELS ({exc})"
            raise CorruptItemError(msg) from exc
        except (OSError, ValueError, SyntaxError) as exc:  # what Pillow raises for bad bytes
            msg = f"{where}: not a readable image ({exc})"
            raise CorruptItemError(msg) from exc
    if wide is not None:  # raised here, not in the try: it is not "not a readable image"
        msg = f"{where}: a {wide} image cannot be read as 8-bit RGB without loss"
        raise CorruptItemError(msg)
    for warning in caught:
        warnings.warn(f"{where}: {warning.message}", warning.category, stacklevel=2)
    return torch.from_numpy(pixels).permute(2, 0, 1).contiguous()  # (3, height, width)


def _is(path: Path, kind: Callable[[Path], bool], what: str = "") -> bool:
    """Whether ``kind(path)`` (``Path.is_file``, ``Path.is_dir``: through links); a link to
    nothing raises, naming it (after ``what``, e.g. ``"class folder "``)."""
    if kind(path):
        return True
    if path.is_symlink() and not path.exists():
        msg = f"{what}'{path}' is a link to '{path.readlink()}', which does not exist"
        raise FileNotFoundError(msg)
    return False


class ImageFolder(Dataset):
    """Map-style dataset over ``root/<class>/<image>``: one file per item.

    Items are ``(image, label)``: a ``uint8`` tensor (3, height, width) and the index
    of its folder in ``classes`` (the folder names, sorted). Files count as images by
    their ending (``IMAGE_SUFFIXES``: png, jpg, jpeg, bmp, gif, webp); folders do not, whatever their name.
    ``transform``, if given, maps the image tensor; it must be importable too (a
    module-level function). A file that is not an image, or whose pixels 8-bit RGB
    would clip (16-bit or float images), raises :class:`~effpt.data.CorruptItemError`,
    an exception from ``transform`` a
    :class:`~effpt.data.TransformError`; both name the file. An image file that is a
    symbolic link to nothing raises :class:`FileNotFoundError` naming the link and
    its target when the dataset is built, instead of being left out; so does a class
    folder that is such a link, which would otherwise shift every later class's label.

    Examples
    --------
    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> _ = write_image_folder(root, 6, size=16)
    >>> dataset = ImageFolder(root)
    >>> image, label = dataset[0]
    >>> len(dataset), image.shape, image.dtype, 0 <= label < len(dataset.classes)
    (6, torch.Size([3, 16, 16]), torch.uint8, True)
    >>> ImageFolder(root + "/missing")
    Traceback (most recent call last):
    ...
    FileNotFoundError: image folder '.../missing' does not exist
    """

    def __init__(self, root: str | Path, transform: Transform | None = None) -> None:
        root = Path(root)
        if root.exists() and not root.is_dir():
            msg = f"image folder '{root}' is a file, not a folder"
            raise NotADirectoryError(msg)
        if not root.is_dir():
            msg = f"image folder '{root}' does not exist"
            raise FileNotFoundError(msg)
        if transform is not None and not callable(transform):
            msg = f"transform must be callable or None, got {type(transform).__name__}"
            raise TypeError(msg)
        # A class folder that is a link to nothing raises: dropping it would give every
        # later class another label.
        self.classes = sorted(
            p.name for p in root.iterdir() if _is(p, Path.is_dir, "class folder ")
        )
        self.samples = [
            (str(path), label)
            for label, name in enumerate(self.classes)
            for path in sorted((root / name).iterdir())
            if path.suffix.lower() in IMAGE_SUFFIXES and _is(path, Path.is_file)
        ]
        if not self.samples:
            msg = f"image folder '{root}' holds no images laid out as <root>/<class>/<image>"
            raise ValueError(msg)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        image = decode_image(Path(path).read_bytes(), where=path)
        if self.transform is not None:
            image = apply_transform(self.transform, image, path)
        return image, label
