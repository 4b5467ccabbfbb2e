package coord

// BoltOpenTimeout lets tests shorten the wait for a locked bbolt file.
var BoltOpenTimeout = &boltOpenTimeout
