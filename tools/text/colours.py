"""Colours as a page paints them (CSS values, PDF fill operators) and how far apart two of them read: what tells text
painted close to its background (white on white, #fefefe, a 5 % grey) from text a reader sees.

Contrast is WCAG 2's ratio of relative luminances (1: the same colour, 21: black on white); a colour with an alpha
is blended over what lies behind it first.
"""

from __future__ import annotations

import colorsys
import re

Colour = tuple[float, float, float, float]  # red, green, blue in 0..1, alpha in 0..1

BLACK: Colour = (0.0, 0.0, 0.0, 1.0)
WHITE: Colour = (1.0, 1.0, 1.0, 1.0)
# CSS named colours a page uses for text or backgrounds (the light ones matter most here); others read as unknown.
NAMED: dict[str, Colour] = {
    "black": BLACK,
    "white": WHITE,
    "transparent": (0.0, 0.0, 0.0, 0.0),
    "snow": (1.0, 250 / 255, 250 / 255, 1.0),
    "ivory": (1.0, 1.0, 240 / 255, 1.0),
    "ghostwhite": (248 / 255, 248 / 255, 1.0, 1.0),
    "whitesmoke": (245 / 255, 245 / 255, 245 / 255, 1.0),
    "floralwhite": (1.0, 250 / 255, 240 / 255, 1.0),
    "aliceblue": (240 / 255, 248 / 255, 1.0, 1.0),
    "mintcream": (245 / 255, 1.0, 250 / 255, 1.0),
    "azure": (240 / 255, 1.0, 1.0, 1.0),
    "seashell": (1.0, 245 / 255, 238 / 255, 1.0),
    "linen": (250 / 255, 240 / 255, 230 / 255, 1.0),
    "honeydew": (240 / 255, 1.0, 240 / 255, 1.0),
    "lavenderblush": (1.0, 240 / 255, 245 / 255, 1.0),
    "gainsboro": (220 / 255, 220 / 255, 220 / 255, 1.0),
    "lightgray": (211 / 255, 211 / 255, 211 / 255, 1.0),
    "lightgrey": (211 / 255, 211 / 255, 211 / 255, 1.0),
    "silver": (192 / 255, 192 / 255, 192 / 255, 1.0),
    "gray": (128 / 255, 128 / 255, 128 / 255, 1.0),
    "grey": (128 / 255, 128 / 255, 128 / 255, 1.0),
    "red": (1.0, 0.0, 0.0, 1.0),
    "green": (0.0, 128 / 255, 0.0, 1.0),
    "blue": (0.0, 0.0, 1.0, 1.0),
    "yellow": (1.0, 1.0, 0.0, 1.0),
    "navy": (0.0, 0.0, 128 / 255, 1.0),
}
_HEX = re.compile(r"#([0-9a-f]{8}|[0-9a-f]{6}|[0-9a-f]{3,4})(?![0-9a-z])")
_FUNCTION = re.compile(r"(rgba?|hsla?)\(\s*([^)]*)\)")
_NUMBER = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))(%|deg)?")


def _channel(value: str, scale: float) -> float:
    match = _NUMBER.fullmatch(value.strip())
    if not match:
        raise ValueError(value)
    number = float(match.group(1))
    return min(1.0, max(0.0, number / 100 if match.group(2) == "%" else number / scale))


def parse_colour(value: str) -> Colour | None:
    """A CSS colour value (a name, #rgb[a], #rrggbb[aa], rgb()/rgba(), hsl()/hsla(), the first colour of a
    `background` shorthand), or None when it names none this reads (an image, a gradient, a variable)."""
    text = value.strip().lower()
    if not text or "gradient(" in text or "url(" in text or "var(" in text:
        return None
    hex_colour = _HEX.search(text)
    function = _FUNCTION.search(text)
    if hex_colour and (not function or hex_colour.start() < function.start()):
        digits = hex_colour.group(1)
        if len(digits) in (3, 4):
            digits = "".join(d * 2 for d in digits)
        channels = [int(digits[i : i + 2], 16) / 255 for i in range(0, len(digits), 2)]
        return (channels[0], channels[1], channels[2], channels[3] if len(channels) == 4 else 1.0)
    if function:
        parts = [p for p in re.split(r"[\s,/]+", function.group(2).strip()) if p]
        try:
            if function.group(1).startswith("rgb") and len(parts) >= 3:
                alpha = _channel(parts[3], 1.0) if len(parts) > 3 else 1.0
                return (_channel(parts[0], 255), _channel(parts[1], 255), _channel(parts[2], 255), alpha)
            if function.group(1).startswith("hsl") and len(parts) >= 3:
                hue = float(_NUMBER.fullmatch(parts[0]).group(1)) / 360 % 1.0  # type: ignore[union-attr]
                lightness, saturation = _channel(parts[2], 100), _channel(parts[1], 100)
                red, green, blue = colorsys.hls_to_rgb(hue, lightness, saturation)
                alpha = _channel(parts[3], 1.0) if len(parts) > 3 else 1.0
                return (red, green, blue, alpha)
        except (ValueError, AttributeError):
            return None
        return None
    for word in re.findall(r"[a-z]+", text):
        if word in NAMED:
            return NAMED[word]
    return None


def blend(front: Colour, behind: Colour) -> Colour:
    """`front` painted over `behind` (opaque behind: an opaque result)."""
    alpha = front[3]
    mixed = [alpha * f + (1 - alpha) * b for f, b in zip(front[:3], behind[:3], strict=True)]
    return (mixed[0], mixed[1], mixed[2], alpha + (1 - alpha) * behind[3])


def _luminance(colour: Colour) -> float:
    def linear(channel: float) -> float:
        return channel / 12.92 if channel <= 0.03928 else ((channel + 0.055) / 1.055) ** 2.4

    red, green, blue = (linear(c) for c in colour[:3])
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def contrast(text: Colour, background: Colour) -> float:
    """WCAG contrast ratio of text over a background (1..21), the text blended over it first."""
    lighter, darker = sorted((_luminance(blend(text, background)), _luminance(background)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)
