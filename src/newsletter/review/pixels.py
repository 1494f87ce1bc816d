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
from dataclasses import dataclass
from typing import NamedTuple

from PIL import Image, ImageChops, ImageDraw

CELL = 8  # px: a word of body text is a few cells; a box this coarse is still exact enough
_GAP = 2  # rows of unchanged cells that still join two changed ones into one band
_PAD = (255, 0, 255)  # what a shorter page is extended with: no email's background
_MARK = (230, 0, 60)
_NOISE_PIXELS = 4  # a round shape's edges on one row: a corner's, both sides of a list bullet
_NOISE_LEVELS = 8  # of 255


class Box(NamedTuple):
    left: int
    top: int
    right: int  # exclusive, as Pillow's boxes
    bottom: int


def decode(png: bytes) -> Image.Image:
    """A shot's PNG as RGB pixels: decoded once, compared and marked from there."""
    return Image.open(io.BytesIO(png)).convert("RGB")


@dataclass(frozen=True)
class Regions:
    """What changed, marked on each side: where the before shot lost or changed something,
    and where the after shot gained or changed it (the same boxes when nothing moved)."""

    before: tuple[Box, ...]
    after: tuple[Box, ...]

    def __bool__(self) -> bool:
        return bool(self.before or self.after)

    @property
    def marked(self) -> int:
        return max(len(self.before), len(self.after))


def changed_regions(before: Image.Image, after: Image.Image) -> Regions:
    """Where the two shots differ, top to bottom; empty when they are identical.

    Of the same height, they are compared pixel for pixel. Of two heights, something was added
    or taken away and all below it moved: the rows both share from the top and from the
    bottom are set aside, and what lies between is the change on each side (a sentence added
    marks its paragraph, not the rest of the email)."""
    if before.width != after.width or before.height == after.height:
        boxes = _pixel_boxes(*_same_size(before, after))
        return Regions(boxes, boxes)
    top, bottom = _common_rows(before, after)
    band_a = (top, before.height - bottom)
    band_b = (top, after.height - bottom)
    return Regions(
        _band_box(before, band_a, after, band_b), _band_box(after, band_b, before, band_a)
    )


def _pixel_boxes(a: Image.Image, b: Image.Image) -> tuple[Box, ...]:
    """The changed pixels of two shots of one size, one box per band of nearby changes."""
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


def _common_rows(a: Image.Image, b: Image.Image) -> tuple[int, int]:
    """How many rows of pixels the two share from the top, and then from the bottom."""
    rows_a, rows_b = _rows(a), _rows(b)
    limit = min(len(rows_a), len(rows_b))
    top = 0
    while top < limit and _alike(rows_a[top], rows_b[top]):
        top += 1
    bottom = 0
    while bottom < limit - top and _alike(rows_a[-1 - bottom], rows_b[-1 - bottom]):
        bottom += 1
    return top, bottom


def _alike(a: bytes, b: bytes) -> bool:
    """Two rows of pixels the same, but for what moving a rounded corner, a shadow or a list's
    round bullet by a fraction of a pixel changes: a few pixels at most (a bullet's left and
    right edges are two each), by a few levels each; a changed letter is far more of both."""
    if a == b:
        return True
    off = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    pixels = {i // 3 for i in off}
    return len(pixels) <= _NOISE_PIXELS and all(abs(a[i] - b[i]) <= _NOISE_LEVELS for i in off)


def _rows(image: Image.Image) -> list[bytes]:
    data, step = image.tobytes(), image.width * 3
    return [data[at : at + step] for at in range(0, len(data), step)]


def _band_box(
    image: Image.Image, band: tuple[int, int], other: Image.Image, other_band: tuple[int, int]
) -> tuple[Box, ...]:
    """The box of `image`'s changed band: as wide as it differs from the other side's band
    where both have rows, else as its own content (what is not the layout's background there);
    no box for a band of no rows (the other side gained them)."""
    top, end = band
    if end <= top:
        return ()
    width = image.width
    overlap = min(end, other_band[1]) - top
    if overlap > 0:
        here = image.crop((0, top, width, top + overlap))
        there = other.crop((0, top, width, top + overlap))
        found = ImageChops.difference(here, there).getbbox()
        if found is not None:
            return (Box(found[0], top, found[2], end),)
    # The row just above the band (or below it) is the layout's background at that place.
    edge = top - 1 if top > 0 else min(end, image.height - 1)
    background = image.crop((0, edge, width, edge + 1)).resize((width, end - top))
    content = ImageChops.difference(image.crop((0, top, width, end)), background).getbbox()
    if content is None:
        return (Box(0, top, width, end),)
    return (Box(content[0], top + content[1], content[2], top + content[3]),)


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
