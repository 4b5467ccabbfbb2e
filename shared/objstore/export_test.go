package objstore

import "time"

// SetConditionalBackoff shortens the 409-retry backoff of S3 conditional puts for a test;
// call the returned func to restore it. Tests using it must not run in parallel.
func SetConditionalBackoff(base, max time.Duration) (restore func()) {
	oldBase, oldMax := condBaseDelay, condMaxDelay
	condBaseDelay, condMaxDelay = base, max
	return func() { condBaseDelay, condMaxDelay = oldBase, oldMax }
}
