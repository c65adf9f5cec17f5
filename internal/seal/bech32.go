package seal

import (
	"fmt"
	"strings"
)

// Bech32 (BIP-173, not bech32m) for Sui's "suiprivkey1…" private keys.

const bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

func bech32Polymod(values []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	for _, v := range values {
		top := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := 0; i < 5; i++ {
			if (top>>i)&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	return chk
}

func bech32HRPExpand(hrp string) []byte {
	out := make([]byte, 0, 2*len(hrp)+1)
	for i := 0; i < len(hrp); i++ {
		out = append(out, hrp[i]>>5)
	}
	out = append(out, 0)
	for i := 0; i < len(hrp); i++ {
		out = append(out, hrp[i]&31)
	}
	return out
}

// convertBits regroups bits; with pad false it rejects leftover bits that
// are not zero padding, as BIP-173 requires.
func convertBits(data []byte, from, to uint, pad bool) ([]byte, error) {
	var acc, bits uint
	maxv := uint(1)<<to - 1
	var out []byte
	for _, v := range data {
		if uint(v)>>from != 0 {
			return nil, fmt.Errorf("invalid data value")
		}
		acc = acc<<from | uint(v)
		bits += from
		for bits >= to {
			bits -= to
			out = append(out, byte(acc>>bits&maxv))
		}
	}
	if pad {
		if bits > 0 {
			out = append(out, byte(acc<<(to-bits)&maxv))
		}
	} else if bits >= from || acc<<(to-bits)&maxv != 0 {
		return nil, fmt.Errorf("invalid padding")
	}
	return out, nil
}

// bech32Decode decodes s and returns its human-readable part and 8-bit data.
func bech32Decode(s string) (string, []byte, error) {
	if len(s) > 90 {
		return "", nil, fmt.Errorf("bech32 string longer than 90 characters")
	}
	if strings.ToLower(s) != s && strings.ToUpper(s) != s {
		return "", nil, fmt.Errorf("bech32 string mixes cases")
	}
	s = strings.ToLower(s)
	sep := strings.LastIndexByte(s, '1')
	if sep < 1 || sep+7 > len(s) {
		return "", nil, fmt.Errorf("bech32 separator misplaced")
	}
	hrp := s[:sep]
	for i := 0; i < len(hrp); i++ {
		if hrp[i] < 33 || hrp[i] > 126 {
			return "", nil, fmt.Errorf("bech32 prefix has an invalid character")
		}
	}
	data := make([]byte, 0, len(s)-sep-1)
	for _, c := range s[sep+1:] {
		i := strings.IndexRune(bech32Charset, c)
		if i < 0 {
			return "", nil, fmt.Errorf("bech32 data has an invalid character")
		}
		data = append(data, byte(i))
	}
	if bech32Polymod(append(bech32HRPExpand(hrp), data...)) != 1 {
		return "", nil, fmt.Errorf("bech32 checksum mismatch")
	}
	out, err := convertBits(data[:len(data)-6], 5, 8, false)
	if err != nil {
		return "", nil, fmt.Errorf("bech32: %w", err)
	}
	return hrp, out, nil
}

// bech32Encode encodes 8-bit data under hrp.
func bech32Encode(hrp string, data []byte) string {
	five, _ := convertBits(data, 8, 5, true)
	values := append(bech32HRPExpand(hrp), five...)
	poly := bech32Polymod(append(values, 0, 0, 0, 0, 0, 0)) ^ 1
	var sb strings.Builder
	sb.WriteString(hrp)
	sb.WriteByte('1')
	for _, v := range five {
		sb.WriteByte(bech32Charset[v])
	}
	for i := 0; i < 6; i++ {
		sb.WriteByte(bech32Charset[(poly>>(5*(5-i)))&31])
	}
	return sb.String()
}
