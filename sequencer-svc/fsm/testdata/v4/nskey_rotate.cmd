‚ ñÂ±4‚!
defaultalias/loam-default-2