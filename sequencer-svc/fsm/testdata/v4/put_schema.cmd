† ñÂ±4Òº
·
defaultorders¡{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"name","type":"utf8","nullable":true},{"name":"age","type":"int32","nullable":true}],"key":"id"} 