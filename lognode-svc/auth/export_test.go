package auth

// CacheLen is how many lookups a holds (tests).
func CacheLen(a *Authenticator) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.cache)
}
