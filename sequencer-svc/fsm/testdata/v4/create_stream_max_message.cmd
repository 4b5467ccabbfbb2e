… ñÂ±4
defaultbigP€€À