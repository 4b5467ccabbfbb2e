ƒ ñÂ±4‚	
default