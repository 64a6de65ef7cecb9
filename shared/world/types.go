package world

import (
	"crypto/ed25519"
	"encoding/json"
	"time"
)

// Manifest is a world as its owner describes it (PUT /v0/worlds/{world}).
type Manifest struct {
	// ID is the world's name in paths: ^[a-z0-9][a-z0-9-]{0,62}$.
	ID          string
	Name        string
	Description string
	Category    string
	// Actions are the actions members may submit; none means any.
	Actions []ActionSpec
	// OwnerKey is the key that created the world and alone may update it.
	OwnerKey   ed25519.PublicKey
	OwnerKeyID string
	// OwnerAWNID is the owner's awnId (auth.AWNID of OwnerKey).
	OwnerAWNID string
	// Status is StatusOpen or StatusClosed (joins refused).
	Status string
	// MaxMembers caps the members; 0 means no cap.
	MaxMembers int64
	// EventShards is how many partitions the world's shared events are
	// written across (1 to MaxEventShards; 0 in a request: 1 at creation,
	// unchanged at an update). It only grows. One partition takes about
	// 500 events a second; each shard costs a poll one Query more
	// (docs/scale.md).
	EventShards int
	// BatchActions queues the world's actions for the committer, which
	// commits many to a transaction (POST …/actions answers 202), instead
	// of one transaction each: for a world whose actions pass the few
	// hundred a second one event head takes (docs/scale.md). Every PUT
	// sets it; absent is false.
	BatchActions bool
	// BatchMessages queues the world's direct messages the same way
	// (POST …/messages answers 202): for an inbox receiving more than a
	// few hundred messages a second, with EventShards spreading the
	// recipient's partitions (docs/scale.md). Every PUT sets it; absent is
	// false.
	BatchMessages bool
	// Members is how many agents are joined now.
	Members   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// World statuses: a closed world refuses joins; its members may still
// read, act and leave.
const (
	StatusOpen   = "open"
	StatusClosed = "closed"
)

// ActionSpec is one action of a manifest.
type ActionSpec struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// Member is one agent's membership of a world.
type Member struct {
	World     string
	AWNID     string
	KeyID     string
	PublicKey ed25519.PublicKey
	// Slot is a small integer unique within the world, allocated at join.
	Slot int64
	// SubjectID is the registry name bound to the same key when the agent
	// joined (or rejoined), "" when none.
	SubjectID string
	// Metadata is what the agent passed at join (a JSON object), or nil.
	Metadata json.RawMessage
	JoinedAt time.Time
	// LastPollAt is when the member last polled events (zero: never).
	LastPollAt time.Time
	// StreamUntil is the lease of an open event stream: the stream
	// refreshes it while it is open (zero: none).
	StreamUntil time.Time
	// ProbeOKAt and ProbeFailAt are the latest live probes of its webhook
	// that it answered and did not answer.
	ProbeOKAt, ProbeFailAt time.Time
	// RegistryOffline: its registration is set offline, which overrides
	// every other sign of presence.
	RegistryOffline bool
	// Announced is the presence last announced by presence.changed ("":
	// none yet, offline).
	Announced string
}
