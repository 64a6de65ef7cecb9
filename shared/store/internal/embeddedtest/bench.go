package embeddedtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/shared/store"
)

// Bench runs the engines' benchmarks: a Get, a one-item Put, a conditional
// two-action Write with an ADD (the shape of a counter update beside a new
// item), and a Query page of 100 items of a 10,000-item partition. Items
// carry about 200 bytes of attributes. open must return a fresh engine
// whose cleanup is registered on b.
func Bench(b *testing.B, open func(b *testing.B) store.Store) {
	attrs := store.Item{"body": store.S(strings.Repeat("x", 180)), "n": store.N(7)}
	seed := func(b *testing.B, s store.Store, n int) {
		for i := range n {
			if _, err := s.Write(ctx, store.Put(store.Key{PK: "p", SK: fmt.Sprintf("%06d", i)}, attrs)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("Get", func(b *testing.B) {
		s := open(b)
		seed(b, s, 1000)
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			if _, err := s.Get(ctx, store.Key{PK: "p", SK: fmt.Sprintf("%06d", i%1000)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Put", func(b *testing.B) {
		s := open(b)
		for i := 0; b.Loop(); i++ {
			if _, err := s.Write(ctx, store.Put(store.Key{PK: "p", SK: fmt.Sprintf("%09d", i)}, attrs)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("WriteTwoActions", func(b *testing.B) {
		s := open(b)
		for i := 0; b.Loop(); i++ {
			_, err := s.Write(ctx,
				store.Put(store.Key{PK: "p", SK: fmt.Sprintf("e%09d", i)}, attrs).When(store.ItemAbsent()),
				store.Update(store.Key{PK: "p", SK: "counter"}).AddNum("n", 1))
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Query100", func(b *testing.B) {
		s := open(b)
		seed(b, s, 10000)
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			page, err := s.Query(ctx, store.Query{PK: "p", SK: store.SKGE(fmt.Sprintf("%06d", i%9900)), Limit: 100})
			if err != nil || len(page.Items) != 100 {
				b.Fatal(len(page.Items), err)
			}
		}
	})
}
