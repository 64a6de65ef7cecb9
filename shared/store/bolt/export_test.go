package bolt

// WithSyncWrapper replaces the file sync after each commit with wrap, which
// receives the real sync: tests count calls or turn syncing off.
func WithSyncWrapper(wrap func(sync func() error) error) Option {
	return func(c *config) { c.wrapSync = wrap }
}
