package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/a2awire/a2awire/shared/store"
)

// The value codec: a tag byte per attribute value, lengths and counts as
// uvarints. It is lossless for every DynamoDB type (numbers keep the exact
// string they were written with, sets their member order, binaries every
// byte), and map keys are written sorted so equal items encode equally.
const (
	tagS    = 'S'
	tagN    = 'N'
	tagB    = 'B'
	tagTrue = 'T'
	tagFals = 'F'
	tagNULL = '0'
	tagL    = 'L'
	tagM    = 'M'
	tagSS   = 's'
	tagNS   = 'n'
	tagBS   = 'b'
)

var errCorrupt = errors.New("bolt: corrupt value in the file")

// encodeItem appends an item (a map without its tag) to dst.
func encodeItem(dst []byte, it store.Item) []byte {
	names := make([]string, 0, len(it))
	for k := range it {
		names = append(names, k)
	}
	sort.Strings(names)
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, k := range names {
		dst = appendString(dst, k)
		dst = encodeValue(dst, it[k])
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func encodeValue(dst []byte, v types.AttributeValue) []byte {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return appendString(append(dst, tagS), v.Value)
	case *types.AttributeValueMemberN:
		return appendString(append(dst, tagN), v.Value)
	case *types.AttributeValueMemberB:
		return appendBytes(append(dst, tagB), v.Value)
	case *types.AttributeValueMemberBOOL:
		if v.Value {
			return append(dst, tagTrue)
		}
		return append(dst, tagFals)
	case *types.AttributeValueMemberNULL:
		return append(dst, tagNULL)
	case *types.AttributeValueMemberL:
		dst = binary.AppendUvarint(append(dst, tagL), uint64(len(v.Value)))
		for _, x := range v.Value {
			dst = encodeValue(dst, x)
		}
		return dst
	case *types.AttributeValueMemberM:
		return encodeItem(append(dst, tagM), v.Value)
	case *types.AttributeValueMemberSS:
		dst = binary.AppendUvarint(append(dst, tagSS), uint64(len(v.Value)))
		for _, s := range v.Value {
			dst = appendString(dst, s)
		}
		return dst
	case *types.AttributeValueMemberNS:
		dst = binary.AppendUvarint(append(dst, tagNS), uint64(len(v.Value)))
		for _, s := range v.Value {
			dst = appendString(dst, s)
		}
		return dst
	case *types.AttributeValueMemberBS:
		dst = binary.AppendUvarint(append(dst, tagBS), uint64(len(v.Value)))
		for _, b := range v.Value {
			dst = appendBytes(dst, b)
		}
		return dst
	}
	// store.ValidateItem refuses every other value before it gets here.
	panic(fmt.Sprintf("bolt: encoding unsupported value %T", v))
}

// decoder reads what encodeItem wrote, copying every byte out of bbolt's
// memory map (which is only valid inside the transaction).
type decoder struct {
	b   []byte
	err error
}

func decodeItem(b []byte) (store.Item, error) {
	d := &decoder{b: b}
	it := d.item()
	if d.err == nil && len(d.b) != 0 {
		d.err = errCorrupt
	}
	if d.err != nil {
		return nil, d.err
	}
	return it, nil
}

func (d *decoder) uvarint() int {
	if d.err != nil {
		return 0
	}
	n, k := binary.Uvarint(d.b)
	if k <= 0 || n > uint64(len(d.b)) { // a count or length never exceeds the bytes left
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[k:]
	return int(n)
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil || n > len(d.b) {
		d.err = errCorrupt
		return nil
	}
	out := make([]byte, n)
	copy(out, d.b[:n])
	d.b = d.b[n:]
	return out
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil || n > len(d.b) {
		d.err = errCorrupt
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) item() store.Item {
	n := d.uvarint()
	it := make(store.Item, n)
	for i := 0; i < n && d.err == nil; i++ {
		k := d.string()
		it[k] = d.value()
	}
	return it
}

func (d *decoder) value() types.AttributeValue {
	if d.err != nil || len(d.b) == 0 {
		d.err = errCorrupt
		return nil
	}
	tag := d.b[0]
	d.b = d.b[1:]
	switch tag {
	case tagS:
		return &types.AttributeValueMemberS{Value: d.string()}
	case tagN:
		return &types.AttributeValueMemberN{Value: d.string()}
	case tagB:
		return &types.AttributeValueMemberB{Value: d.bytes()}
	case tagTrue, tagFals:
		return &types.AttributeValueMemberBOOL{Value: tag == tagTrue}
	case tagNULL:
		return &types.AttributeValueMemberNULL{Value: true}
	case tagL:
		n := d.uvarint()
		l := make([]types.AttributeValue, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			l = append(l, d.value())
		}
		return &types.AttributeValueMemberL{Value: l}
	case tagM:
		return &types.AttributeValueMemberM{Value: d.item()}
	case tagSS, tagNS:
		n := d.uvarint()
		ss := make([]string, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			ss = append(ss, d.string())
		}
		if tag == tagSS {
			return &types.AttributeValueMemberSS{Value: ss}
		}
		return &types.AttributeValueMemberNS{Value: ss}
	case tagBS:
		n := d.uvarint()
		bs := make([][]byte, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			bs = append(bs, d.bytes())
		}
		return &types.AttributeValueMemberBS{Value: bs}
	}
	d.err = errCorrupt
	return nil
}
