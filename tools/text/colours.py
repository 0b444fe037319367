"""Colours as a page paints them (CSS values, PDF fill operators) and how far apart two of them read: what tells text
painted close to its background (white on white, #fefefe, a 5 % grey) from text a reader sees.

Contrast is WCAG 2's ratio of relative luminances (1: the same colour, 21: black on white); a colour with an alpha
is blended over what lies behind it first.
"""

from __future__ import annotations

import colorsys
import re

Colour = tuple[float, float, float, float]  # red, green, blue in 0..1, alpha in 0..1
CHANNEL_MAX = 255  # fact: a CSS colour channel's largest value
PERCENT = 100  # fact: a CSS percentage's whole
TURN_DEGREES = 360  # fact: a hue's turn in degrees
HEX_BASE = 16  # fact: hexadecimal
RGB, RGBA = 3, 4  # fact: channels without and with alpha
# WCAG 2 relative luminance: the sRGB transfer function and the channels' weights, and the flare in a ratio.
SRGB_LINEAR_LIMIT, SRGB_SLOPE, SRGB_OFFSET, SRGB_GAMMA = 0.03928, 12.92, 0.055, 2.4  # fact: WCAG 2 (sRGB)
LUMINANCE_WEIGHTS = (0.2126, 0.7152, 0.0722)  # fact: WCAG 2 relative luminance
CONTRAST_FLARE = 0.05  # fact: WCAG 2 contrast ratio

BLACK: Colour = (0.0, 0.0, 0.0, 1.0)
WHITE: Colour = (1.0, 1.0, 1.0, 1.0)
# CSS named colours a page uses for text or backgrounds (the light ones matter most here); others read as unknown.
NAMED: dict[str, Colour] = {  # fact: CSS named colour values
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
    return min(1.0, max(0.0, number / PERCENT if match.group(2) == "%" else number / scale))


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
        if len(digits) in (RGB, RGBA):  # the short form: each digit doubled
            digits = "".join(d * 2 for d in digits)
        channels = [int(digits[i : i + 2], HEX_BASE) / CHANNEL_MAX for i in range(0, len(digits), 2)]
        return (channels[0], channels[1], channels[2], channels[3] if len(channels) == RGBA else 1.0)
    if function:
        parts = [p for p in re.split(r"[\s,/]+", function.group(2).strip()) if p]
        try:
            alpha = _channel(parts[RGB], 1.0) if len(parts) > RGB else 1.0
            if function.group(1).startswith("rgb") and len(parts) >= RGB:
                red, green, blue = (_channel(part, CHANNEL_MAX) for part in parts[:RGB])
                return (red, green, blue, alpha)
            if function.group(1).startswith("hsl") and len(parts) >= RGB:
                hue = float(_NUMBER.fullmatch(parts[0]).group(1)) / TURN_DEGREES % 1.0  # type: ignore[union-attr]
                lightness, saturation = _channel(parts[2], PERCENT), _channel(parts[1], PERCENT)
                red, green, blue = colorsys.hls_to_rgb(hue, lightness, saturation)
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
    alpha = front[RGB]
    mixed = [alpha * f + (1 - alpha) * b for f, b in zip(front[:RGB], behind[:RGB], strict=True)]
    return (mixed[0], mixed[1], mixed[2], alpha + (1 - alpha) * behind[RGB])


def _luminance(colour: Colour) -> float:
    def linear(channel: float) -> float:
        if channel <= SRGB_LINEAR_LIMIT:
            return channel / SRGB_SLOPE
        return float(((channel + SRGB_OFFSET) / (1 + SRGB_OFFSET)) ** SRGB_GAMMA)

    return sum(weight * linear(c) for weight, c in zip(LUMINANCE_WEIGHTS, colour[:RGB], strict=True))


def contrast(text: Colour, background: Colour) -> float:
    """WCAG contrast ratio of text over a background (1..21), the text blended over it first."""
    lighter, darker = sorted((_luminance(blend(text, background)), _luminance(background)), reverse=True)
    return (lighter + CONTRAST_FLARE) / (darker + CONTRAST_FLARE)
