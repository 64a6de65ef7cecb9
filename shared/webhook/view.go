package webhook

import "time"

// Stats are a webhook's delivery counters.
type Stats struct {
	Delivered    int64 `json:"delivered"`
	Failed       int64 `json:"failed"`
	DeadLettered int64 `json:"deadLettered"`
	// ActionsDropped counts the receiver's answered actions that were not
	// forwarded: an answer to a forwarded action (one hop only), over the
	// agent's action rate limit, or refused by the world.
	ActionsDropped int64      `json:"actionsDropped"`
	LastError      string     `json:"lastError,omitempty"`
	LastErrorAt    *time.Time `json:"lastErrorAt,omitempty"`
	LastSuccessAt  *time.Time `json:"lastSuccessAt,omitempty"`
}

// View is what a member sees of its webhook: never the secret.
type View struct {
	URL            string    `json:"url"`
	Enabled        bool      `json:"enabled"`
	DisabledReason string    `json:"disabledReason,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
	Stats          Stats     `json:"stats"`
}
