‡ ñÂ±4%
defaultorders"quorumZuse1-az1