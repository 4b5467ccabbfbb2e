† ñÂ±4âJH
defaultbilling-kafka *
ordersx ÿÿÿÿÿÿÿÿÿ*batch 7*

orders