‡ ñÂ±4¢
defaultbilling