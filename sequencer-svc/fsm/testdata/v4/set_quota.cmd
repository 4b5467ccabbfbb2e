… ñÂ±4ò

default€€@