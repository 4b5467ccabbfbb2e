… ñÂ±4"
defaultbig0€