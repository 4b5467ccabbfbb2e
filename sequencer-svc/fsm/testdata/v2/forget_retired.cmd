b!
wal/a
seg/4/2/100-01JDQ8ZP.seg