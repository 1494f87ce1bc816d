"""Two screenshots in; the regions where they differ out, and each shot with them marked.

Pillow's ImageChops compares the two exactly, in C. Both shots come from one Chromium in one run
with the same fonts, so an unchanged pixel is the same byte on both sides: the anti-aliasing
that pixelmatch's tolerance is made for (two renderers, two machines) does not arise, and
pixelmatch's Python port walks each pixel in Python (seconds for a 680 x 4000 shot, where this
takes milliseconds). Changed pixels are gathered on a grid of CELL-px cells; neighbouring
changed rows of cells make one band, marked as one box around its changed pixels. A page
that grew is padded, so what is new below its old end is marked too.
"""

from __future__ import annotations

import io
from typing import NamedTuple

from PIL import Image, ImageChops, ImageDraw

CELL = 8  # px: a word of body text is a few cells; a box this coarse is still exact enough
_GAP = 2  # rows of unchanged cells that still join two changed ones into one band
_PAD = (255, 0, 255)  # what a shorter page is extended with: no email's background
_MARK = (230, 0, 60)


class Box(NamedTuple):
    left: int
    top: int
    right: int  # exclusive, as Pillow's boxes
    bottom: int


def decode(png: bytes) -> Image.Image:
    """A shot's PNG as RGB pixels: decoded once, compared and marked from there."""
    return Image.open(io.BytesIO(png)).convert("RGB")


def changed_regions(before: Image.Image, after: Image.Image) -> tuple[Box, ...]:
    """Where `after` differs from `before`, top to bottom; () when identical."""
    a, b = _same_size(before, after)
    mask = ImageChops.difference(a, b).convert("L").point(lambda v: 255 if v else 0)
    if mask.getbbox() is None:
        return ()
    width, height = mask.size
    # A cell's mean is above zero as soon as one of its pixels changed.
    cells = mask.reduce(CELL)
    columns, rows = cells.size
    grid = cells.tobytes()
    changed_rows = [[x for x in range(columns) if grid[y * columns + x]] for y in range(rows)]
    boxes: list[Box] = []
    band: list[int] = []  # the rows of the band being gathered
    for y, xs in enumerate([*changed_rows, *([[]] * (_GAP + 1))]):
        if xs:
            band.append(y)
        elif band and y - band[-1] > _GAP:
            xs_in = [x for row in band for x in changed_rows[row]]
            cell_box = (
                min(xs_in) * CELL,
                band[0] * CELL,
                min((max(xs_in) + 1) * CELL, width),
                min((band[-1] + 1) * CELL, height),
            )
            # The cells found the band; its changed pixels give the exact box.
            exact = mask.crop(cell_box).getbbox()
            if exact is not None:
                left, top = cell_box[0], cell_box[1]
                boxes.append(Box(left + exact[0], top + exact[1], left + exact[2], top + exact[3]))
            band = []
    return tuple(boxes)


def mark(shot: Image.Image, boxes: tuple[Box, ...]) -> bytes:
    """The shot with each box lightly tinted and outlined, as PNG. Encoding a tall shot is
    most of this step's time: zlib's fastest level makes files about as small as its default
    (a screenshot is flat colour), in half the time."""
    image = shot.copy()
    draw = ImageDraw.Draw(image)
    for box in boxes:
        inside = image.crop(box)
        image.paste(Image.blend(inside, Image.new("RGB", inside.size, _MARK), 0.15), box[:2])
        outline = (max(box.left - 2, 0), max(box.top - 2, 0), box.right + 1, box.bottom + 1)
        draw.rectangle(outline, outline=_MARK, width=3)
    out = io.BytesIO()
    image.save(out, "PNG", compress_level=1)
    return out.getvalue()


def _same_size(a: Image.Image, b: Image.Image) -> tuple[Image.Image, Image.Image]:
    size = (max(a.width, b.width), max(a.height, b.height))
    return _padded(a, size), _padded(b, size)


def _padded(image: Image.Image, size: tuple[int, int]) -> Image.Image:
    if image.size == size:
        return image
    canvas = Image.new("RGB", size, _PAD)
    canvas.paste(image, (0, 0))
    return canvas
