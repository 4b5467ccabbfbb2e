… ñÂ±4Rë
*segment"segmenter-01JDQ8ZK(0àôôÂ±4Fd
"2wal/standard/node-1/01JDQ8ZK3M4N5P6Q7R8S9T0V1W.wal(@0è8ıŸñÂ±4Gn"2wal/standard/node-2/01JDQ8ZM3M4N5P6Q7R8S9T0V1W.wal(€0ô8€ ñÂ±4,d"seg/4/2/100-01JDQ8ZP.seg(@0ø
8€ ñÂ±4