//go:build race

package httpapi_test

// raceEnabled: the race detector changes what allocates, so allocation counts are only
// logged under it.
const raceEnabled = true
