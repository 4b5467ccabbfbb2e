‡ ñÂ±4"
defaultorders
:use1-az2