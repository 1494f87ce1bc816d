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
    """The boxes of two shots of one height: the same on both sides."""
    found = regions_of(decode(before), decode(after))
    assert found.before == found.after
    return found.after


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


def test_a_page_that_grew_at_its_end_is_marked_there() -> None:
    before = shot(200, 300, (10, 10, 60, 20))
    after = shot(200, 380, (10, 10, 60, 20), (20, 330, 90, 345))
    found = regions_of(decode(before), decode(after))
    assert found.before == ()  # nothing of it was lost or changed
    assert found.after == (Box(20, 330, 91, 346),)


def test_a_block_added_in_the_middle_marks_it_not_all_that_moved_below() -> None:
    """A paragraph added between two others: the one below moved down, and is not marked."""
    above, below = (10, 10, 150, 20), (10, 100, 120, 110)
    added = (30, 60, 90, 80)
    before = shot(200, 300, above, below)
    moved = (below[0], below[1] + 50, below[2], below[3] + 50)
    after = shot(200, 350, above, added, moved)
    found = regions_of(decode(before), decode(after))
    assert found.before == ()
    (box,) = found.after
    assert overlaps(box, added)
    assert not overlaps(box, moved)
    assert not overlaps(box, above)
    assert found.marked == 1


def test_a_block_that_grew_is_marked_on_both_sides() -> None:
    """A paragraph that got longer, its last line rewrapped: its old last line before, its new
    lines after; the paragraph below it, moved, is not marked."""
    para, below = (10, 40, 150, 60), (10, 150, 120, 160)
    before = shot(200, 300, para, below)
    after = shot(200, 330, (10, 40, 150, 55), (10, 60, 100, 90), (10, 180, 120, 190))
    found = regions_of(decode(before), decode(after))
    (old,) = found.before
    (new,) = found.after
    assert overlaps(old, para)
    assert overlaps(new, (10, 61, 150, 90))  # the lines it gained
    assert not overlaps(new, (10, 180, 120, 190))
    assert not overlaps(old, below)


def test_mark_draws_at_the_boxes_only() -> None:
    page = shot(200, 300)
    marked = Image.open(io.BytesIO(mark(decode(page), (Box(40, 40, 80, 60),)))).convert("RGB")
    assert marked.size == (200, 300)
    assert marked.getpixel((40, 50)) != (255, 255, 255)  # the outline
    assert marked.getpixel((60, 50)) != (255, 255, 255)  # the tint inside
    assert marked.getpixel((150, 200)) == (255, 255, 255)
    untouched = Image.open(io.BytesIO(mark(decode(page), ()))).convert("RGB")
    assert untouched.tobytes() == Image.open(io.BytesIO(page)).convert("RGB").tobytes()
