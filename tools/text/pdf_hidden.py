"""PDF text a reader never sees, dropped before the text is extracted: text painted in the colour behind it (white
on a white page, near-white, the colour of a filled box under it), text whose rendered size is at most
HIDDEN_TEXT.font_pt points, text in an invisible render mode (3: neither filled nor stroked; 7: a clip only), and
text placed outside the page.

A page's content stream is read once, operator by operator, keeping the graphics state a viewer keeps (the
transformation matrix, fill and stroke colours, the text matrix, font size and render mode, saved and restored with
`q`/`Q`) and the filled rectangles drawn so far (what lies behind later text). Each text-showing operator whose
text would not show is removed; the rest of the page is extracted by pypdf as before, so a page with nothing hidden
reads exactly as it did. A form XObject the page draws is read the same way, with the state at the point it is
drawn, and rewritten in place when it hid text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from reground.tools.text.colours import BLACK, WHITE, Colour, contrast
from reground.tools.tuning.signals import HIDDEN_TEXT

Matrix = tuple[float, float, float, float, float, float]
IDENTITY: Matrix = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
INVISIBLE_MODES = frozenset({3, 7})  # fact: PDF text render modes that paint nothing
STROKE_MODES = frozenset({1, 5})  # fact: render modes that only stroke the glyphs' outlines
_SHOW = frozenset({b"Tj", b"TJ", b"'", b'"'})
_FILL = frozenset({b"f", b"F", b"f*", b"B", b"B*", b"b", b"b*"})
_PATH_END = frozenset({b"n", b"S", b"s", *_FILL})
RECTANGLES_KEPT = HIDDEN_TEXT.pdf_backgrounds_kept
MATRIX, RECTANGLE = 6, 4  # fact: the numbers of a PDF matrix (a b c d e f) and of a rectangle (x y w h)
GRAY, RGB, CMYK = 1, 3, 4  # fact: the components of PDF's device colour spaces


def _multiply(m: Matrix, n: Matrix) -> Matrix:
    a, b, c, d, e, f = m
    a2, b2, c2, d2, e2, f2 = n
    return (
        a * a2 + b * c2,
        a * b2 + b * d2,
        c * a2 + d * c2,
        c * b2 + d * d2,
        e * a2 + f * c2 + e2,
        e * b2 + f * d2 + f2,
    )


def _apply(m: Matrix, x: float, y: float) -> tuple[float, float]:
    return (m[0] * x + m[2] * y + m[4], m[1] * x + m[3] * y + m[5])


def _colour(values: list[float]) -> Colour | None:
    """A device colour from its components: one (gray), three (RGB) or four (CMYK); others (a pattern) unknown."""
    clamp = [min(1.0, max(0.0, v)) for v in values]
    if len(clamp) == GRAY:
        return (clamp[0], clamp[0], clamp[0], 1.0)
    if len(clamp) == RGB:
        return (clamp[0], clamp[1], clamp[2], 1.0)
    if len(clamp) == CMYK:
        c, m, y, k = clamp
        return ((1 - c) * (1 - k), (1 - m) * (1 - k), (1 - y) * (1 - k), 1.0)
    return None


@dataclass(frozen=True)
class _State:
    ctm: Matrix = IDENTITY
    fill: Colour | None = BLACK
    stroke: Colour | None = BLACK
    font_size: float = 0.0
    mode: int = 0
    leading: float = 0.0


@dataclass(frozen=True)
class _Rect:
    left: float
    bottom: float
    right: float
    top: float
    colour: Colour | None

    def holds(self, x: float, y: float) -> bool:
        return self.left <= x <= self.right and self.bottom <= y <= self.top


def _numbers(operands: list[Any]) -> list[float]:
    out = []
    for value in operands:
        try:
            out.append(float(value))
        except (TypeError, ValueError):
            continue
    return out


def _shown_chars(operator: bytes, operands: list[Any]) -> int:
    """How many characters a text-showing operator paints (its strings' lengths)."""
    values = operands[0] if operator == b"TJ" and operands else operands[-1:] if operands else []
    items = values if isinstance(values, list) else [values]
    return sum(len(item) for item in items if isinstance(item, (str, bytes)))


class _Reader:
    """Walks one page's operators, deciding for each text-showing one whether its text shows."""

    def __init__(self, page_box: tuple[float, float, float, float]) -> None:
        self.box = page_box
        self.state = _State()
        self.saved: list[_State] = []
        self.text_matrix = IDENTITY
        self.line_matrix = IDENTITY
        self.path: list[_Rect] = []
        self.rectangles: list[_Rect] = []

    def _move_line(self, tx: float, ty: float) -> None:
        self.line_matrix = _multiply((1.0, 0.0, 0.0, 1.0, tx, ty), self.line_matrix)
        self.text_matrix = self.line_matrix

    def hidden(self) -> bool:
        """Whether text shown now would be invisible to a reader."""
        state = self.state
        if state.mode in INVISIBLE_MODES:
            return True
        rendering = _multiply(self.text_matrix, state.ctm)
        scale = math.sqrt(abs(rendering[0] * rendering[3] - rendering[1] * rendering[2]))
        if abs(state.font_size) * scale <= HIDDEN_TEXT.font_pt:
            return True
        x, y = rendering[4], rendering[5]
        left, bottom, right, top = self.box
        if not (left <= x <= right and bottom <= y <= top):
            return True
        paint = state.stroke if state.mode in STROKE_MODES else state.fill
        behind = next((r.colour for r in reversed(self.rectangles) if r.holds(x, y)), WHITE)
        if paint is None or behind is None:
            return False
        return contrast(paint, behind) < HIDDEN_TEXT.min_contrast

    def step(self, operator: bytes, operands: list[Any]) -> None:
        """Update the state for one operator (a text-showing one's own move is applied by the caller)."""
        state = self.state
        numbers = _numbers(operands)
        if operator == b"q":
            self.saved.append(state)
        elif operator == b"Q":
            self.state = self.saved.pop() if self.saved else _State()
        elif operator == b"cm" and len(numbers) == MATRIX:
            self.state = replace(state, ctm=_multiply(tuple(numbers), state.ctm))  # type: ignore[arg-type]
        elif operator in (b"g", b"rg", b"k"):
            self.state = replace(state, fill=_colour(numbers))
        elif operator in (b"G", b"RG", b"K"):
            self.state = replace(state, stroke=_colour(numbers))
        elif operator in (b"sc", b"scn"):
            self.state = replace(state, fill=_colour(numbers))
        elif operator in (b"SC", b"SCN"):
            self.state = replace(state, stroke=_colour(numbers))
        elif operator == b"cs":
            self.state = replace(state, fill=BLACK)
        elif operator == b"CS":
            self.state = replace(state, stroke=BLACK)
        elif operator == b"BT":
            self.text_matrix = self.line_matrix = IDENTITY
        elif operator == b"Tf" and numbers:
            self.state = replace(state, font_size=numbers[-1])
        elif operator == b"Tr" and numbers:
            self.state = replace(state, mode=int(numbers[0]))
        elif operator == b"TL" and numbers:
            self.state = replace(state, leading=numbers[0])
        elif operator == b"Td" and len(numbers) == 2:
            self._move_line(numbers[0], numbers[1])
        elif operator == b"TD" and len(numbers) == 2:
            self.state = replace(state, leading=-numbers[1])
            self._move_line(numbers[0], numbers[1])
        elif operator == b"Tm" and len(numbers) == MATRIX:
            self.text_matrix = self.line_matrix = tuple(numbers)  # type: ignore[assignment]
        elif operator in (b"T*", b"'", b'"'):
            self._move_line(0.0, -state.leading)
        elif operator == b"re" and len(numbers) == RECTANGLE:
            x, y, w, h = numbers
            corners = [_apply(state.ctm, cx, cy) for cx, cy in ((x, y), (x + w, y), (x, y + h), (x + w, y + h))]
            xs, ys = [c[0] for c in corners], [c[1] for c in corners]
            self.path.append(_Rect(min(xs), min(ys), max(xs), max(ys), None))
        if operator in _FILL:
            self.rectangles.extend(replace(r, colour=state.fill) for r in self.path)
            del self.rectangles[:-RECTANGLES_KEPT]
        if operator in _PATH_END:
            self.path = []


def strip_hidden_text(page: Any) -> int:
    """Remove the text-showing operators of a pypdf page (and of the form XObjects it draws) whose text a reader
    would not see; the characters removed (0: the page is left as it was)."""
    from pypdf.generic import ContentStream, NameObject

    contents = page.get_contents()
    if contents is None:
        return 0
    if not isinstance(contents, ContentStream):
        contents = ContentStream(contents, page.pdf)
    box = page.cropbox
    reader = _Reader((float(box.left), float(box.bottom), float(box.right), float(box.top)))
    kept, dropped = _filtered(contents.operations, reader, page.get("/Resources"), page.pdf, FORM_DEPTH)
    if dropped:
        contents.operations = kept
        page[NameObject("/Contents")] = contents  # this page object only (pypdf's replace_contents needs a writer)
    return dropped


FORM_DEPTH = HIDDEN_TEXT.pdf_form_depth


def _filtered(
    operations: list[tuple[Any, bytes]], reader: _Reader, resources: Any, pdf: Any, depth: int
) -> tuple[list[tuple[Any, bytes]], int]:
    """The operations without the text-showing ones whose text would not show, and the characters dropped; a form
    XObject drawn (`Do`) is read with the state at that point and rewritten in place when it hid text."""
    kept: list[tuple[Any, bytes]] = []
    dropped = 0
    for operands, operator in operations:
        if operator in _SHOW:
            if operator in (b"'", b'"'):
                reader.step(operator, operands)  # the line move comes first
            if reader.hidden():
                dropped += _shown_chars(operator, operands)
                if operator in (b"'", b'"'):
                    kept.append(([], b"T*"))  # the move stays: the lines after it keep their places
                continue
        elif operator == b"Do" and operands and depth > 0:
            dropped += _form(str(operands[0]), reader, resources, pdf, depth - 1)
        else:
            reader.step(operator, operands)
        kept.append((operands, operator))
    return kept, dropped


def _form(name: str, reader: _Reader, resources: Any, pdf: Any, depth: int) -> int:
    """Strip the hidden text of the form XObject `name` drawn now (its own matrix applied); characters dropped."""
    from pypdf.generic import ContentStream, DecodedStreamObject, NameObject

    try:
        xobjects = resources.get_object()["/XObject"].get_object()
        form = xobjects[name].get_object()
    except (AttributeError, KeyError, TypeError):
        return 0
    if form.get("/Subtype") != "/Form":
        return 0
    matrix = _numbers(list(form.get("/Matrix", [])))
    inner = _Reader(reader.box)
    if len(matrix) == MATRIX:
        a, b, c, d, e, f = matrix
        inner.state = replace(reader.state, ctm=_multiply((a, b, c, d, e, f), reader.state.ctm))
    else:
        inner.state = reader.state
    inner.rectangles = list(reader.rectangles)
    stream = ContentStream(form, pdf)
    kept, dropped = _filtered(stream.operations, inner, form.get("/Resources", resources), pdf, depth)
    if dropped:
        stream.operations = kept
        rewritten = DecodedStreamObject()
        for key, value in form.items():
            if key not in ("/Filter", "/DecodeParms", "/Length"):
                rewritten[NameObject(key)] = value
        rewritten.set_data(stream.get_data())
        xobjects[NameObject(name)] = rewritten
    return dropped
