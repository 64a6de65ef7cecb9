package auth

import (
	"crypto/ed25519"
	"sync"
)

// KeyCache remembers keys this instance has already verified, by keyid.
// A keyid is its key's thumbprint, so an entry can never name a wrong key:
// it is self-certifying, and caching it tells nothing about whether the key
// is still registered or a member — the caller checks that where it reads
// or writes (world.Service.MemberKey adds the membership check to the
// request's guard). Safe for concurrent use; bounded: when full, an
// arbitrary entry makes room (map iteration order), which is enough for a
// Lambda instance's working set of keys.
type KeyCache struct {
	mu   sync.Mutex
	max  int
	keys map[string]ed25519.PublicKey
}

// DefaultKeyCacheSize is the entries of NewKeyCache(0): 4096 keys of 32
// bytes, some 300 KB with the map's overhead.
const DefaultKeyCacheSize = 4096

// NewKeyCache returns a cache of at most max keys (DefaultKeyCacheSize
// when max ≤ 0).
func NewKeyCache(max int) *KeyCache {
	if max <= 0 {
		max = DefaultKeyCacheSize
	}
	return &KeyCache{max: max, keys: map[string]ed25519.PublicKey{}}
}

// Get returns the key of keyID if cached.
func (c *KeyCache) Get(keyID string) (ed25519.PublicKey, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pub, ok := c.keys[keyID]
	return pub, ok
}

// Put caches pub under its own thumbprint; a key that is not a safe
// Ed25519 key is not cached.
func (c *KeyCache) Put(pub ed25519.PublicKey) {
	if CheckPublicKey(pub) != nil {
		return
	}
	id := KeyID(pub)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.keys[id]; ok {
		return
	}
	if len(c.keys) >= c.max {
		for k := range c.keys {
			delete(c.keys, k)
			break
		}
	}
	c.keys[id] = append(ed25519.PublicKey(nil), pub...)
}
