package ident

// The identifier shapes of the network, each defined here once: every
// package that checks one of these names uses the Shape below, so that a
// name one part accepts no other part refuses (a webhook receiver's
// answered action, say, is held to the rule POST …/actions and world
// manifests use). Each is a value: a package that keeps a copy under a
// name of its own still has the one rule. The tests hold each to its
// regular expression.
var (
	// WorldID is a world's id: ^[a-z0-9][a-z0-9-]{0,62}$.
	WorldID = Shape{First: Of("a-z0-9"), Rest: Of("a-z0-9-"), Min: 1, Max: 63}
	// ActionName is an action's name, in a manifest, in POST …/actions
	// and in a webhook receiver's answer: ^[a-z0-9][a-z0-9._-]{0,63}$.
	ActionName = Shape{First: Of("a-z0-9"), Rest: Of("a-z0-9._-"), Min: 1, Max: 64}
	// AgentName is a registered agent's name: ^[a-z0-9][a-z0-9-]{1,62}$.
	AgentName = Shape{First: Of("a-z0-9"), Rest: Of("a-z0-9-"), Min: 2, Max: 63}
	// Capability is a capability an agent lists: ^[a-z0-9][a-z0-9-]{0,63}$.
	Capability = Shape{First: Of("a-z0-9"), Rest: Of("a-z0-9-"), Min: 1, Max: 64}
	// KeyID is a key's id, 43 base64url characters: ^[A-Za-z0-9_-]{43}$.
	KeyID = Shape{First: Of("A-Za-z0-9_-"), Rest: Of("A-Za-z0-9_-"), Min: 43, Max: 43}
	// AWNIDHex is the part of an awnId after "aw:sha256:": ^[0-9a-f]{64}$.
	AWNIDHex = Shape{First: Of("0-9a-f"), Rest: Of("0-9a-f"), Min: 64, Max: 64}
	// MediaTypeName is each half of a MIME type's type/subtype (RFC 6838):
	// ^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$.
	MediaTypeName = Shape{First: Of("A-Za-z0-9"), Rest: Of("A-Za-z0-9!#$&^_.+-"), Min: 1, Max: 127}
)
