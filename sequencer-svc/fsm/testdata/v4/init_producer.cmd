… ñÂ±4r
defaultbilling (ô