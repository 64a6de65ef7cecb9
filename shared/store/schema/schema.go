// Package schema defines the single DynamoDB table every function shares.
//
// It is plain data with no AWS SDK types so that the DynamoDB adapter (which
// creates the table for tests and the local harness) and the CDK app (which
// deploys it) read one definition and cannot disagree. Key patterns are
// documented with the adapter in shared/store/dynamo.
package schema

// AttrType is a DynamoDB key attribute type.
type AttrType string

// Key attribute types.
const (
	String AttrType = "S"
	Number AttrType = "N"
)

// Attr is one key attribute.
type Attr struct {
	Name string
	Type AttrType
}

// Index is a global secondary index projecting all attributes.
type Index struct {
	Name         string
	PartitionKey Attr
	SortKey      Attr
}

// Table describes the table's keys, indexes, TTL and stream.
type Table struct {
	PartitionKey Attr
	SortKey      Attr
	Indexes      []Index
	// TTLAttribute holds an epoch-seconds expiry. DynamoDB deletes expired
	// items lazily, so readers still check expiry themselves.
	TTLAttribute string
	// StreamView is the stream view type that drives the webhook dispatcher.
	StreamView string
}

// Default returns the a2awire table definition.
func Default() Table {
	return Table{
		PartitionKey: Attr{Name: "pk", Type: String},
		SortKey:      Attr{Name: "sk", Type: String},
		Indexes: []Index{{
			Name:         "gsi1",
			PartitionKey: Attr{Name: "gsi1pk", Type: String},
			SortKey:      Attr{Name: "gsi1sk", Type: String},
		}},
		TTLAttribute: "expiresAt",
		StreamView:   "NEW_AND_OLD_IMAGES",
	}
}
