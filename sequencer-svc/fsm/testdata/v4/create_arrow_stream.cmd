… ñÂ±4Ò’

defaultorderss{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"name","type":"utf8","nullable":true}],"key":"id"}(0@€İÛ