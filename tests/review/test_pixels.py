"""The pixel diff of `diff --html` (issue 33, point 1): identical shots mark nothing; a change
is marked where it is, each separate change on its own; a page that grew is marked below its
old end; mark() draws on the shot where the boxes are and nowhere else."""

from __future__ import annotations

import io

from PIL import Image, ImageDraw

from newsletter.review.pixels import CELL, Box, decode, mark
from newsletter.review.pixels import changed_regions as regions_of


def shot(width: int = 200, height: int = 300, *rects: tuple[int, int, int, int]) -> bytes:
    """A white page with a black rectangle at each of `rects`, as PNG."""
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    for rect in rects:
        draw.rectangle(rect, fill="black")
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def changed_regions(before: bytes, after: bytes) -> tuple[Box, ...]:
    return regions_of(decode(before), decode(after))


def overlaps(box: Box, rect: tuple[int, int, int, int]) -> bool:
    left, top, right, bottom = rect
    return box.left <= right and left < box.right and box.top <= bottom and top < box.bottom


def test_identical_shots_mark_nothing() -> None:
    page = shot(200, 300, (10, 10, 60, 20), (10, 40, 120, 50))
    assert changed_regions(page, page) == ()
    assert changed_regions(page, shot(200, 300, (10, 10, 60, 20), (10, 40, 120, 50))) == ()


def test_one_changed_pixel_is_one_small_box_around_it() -> None:
    before = shot(200, 300)
    after = shot(200, 300, (101, 150, 101, 150))
    (box,) = changed_regions(before, after)
    assert overlaps(box, (101, 150, 101, 150))
    assert box == Box(101, 150, 102, 151)  # exactly the pixel (right, bottom exclusive)


def test_two_changes_far_apart_are_two_boxes_each_on_its_change() -> None:
    word = (30, 40, 70, 52)  # a word's box at the top
    other = (120, 250, 180, 262)  # and one near the bottom
    before = shot(200, 300, (30, 40, 60, 52))
    after = shot(200, 300, word, other)
    boxes = changed_regions(before, after)
    assert len(boxes) == 2, boxes
    assert overlaps(boxes[0], (61, 40, 70, 52))
    assert not overlaps(boxes[0], other)
    assert overlaps(boxes[1], other)
    assert not overlaps(boxes[1], word)
    # Neither box reaches far past what changed: the unchanged rest of the page is not marked.
    assert boxes[0].bottom <= 52 + CELL
    assert boxes[1].top >= 250 - CELL


def test_a_page_that_grew_is_marked_below_its_old_end() -> None:
    before = shot(200, 300)
    after = shot(200, 380)
    (box,) = changed_regions(before, after)
    assert (box.top, box.bottom) == (300, 380)
    assert (box.left, box.right) == (0, 200)


def test_mark_draws_at_the_boxes_only() -> None:
    page = shot(200, 300)
    marked = Image.open(io.BytesIO(mark(decode(page), (Box(40, 40, 80, 60),)))).convert("RGB")
    assert marked.size == (200, 300)
    assert marked.getpixel((40, 50)) != (255, 255, 255)  # the outline
    assert marked.getpixel((60, 50)) != (255, 255, 255)  # the tint inside
    assert marked.getpixel((150, 200)) == (255, 255, 255)
    untouched = Image.open(io.BytesIO(mark(decode(page), ()))).convert("RGB")
    assert untouched.tobytes() == Image.open(io.BytesIO(page)).convert("RGB").tobytes()
