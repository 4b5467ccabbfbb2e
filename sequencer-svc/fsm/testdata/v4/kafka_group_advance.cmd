… ñÂ±4â$
"
defaultbilling-kafka"consumer