… ñÂ±4ú

default€€@