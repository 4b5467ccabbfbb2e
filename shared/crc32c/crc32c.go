// Package crc32c combines CRC-32C (Castagnoli) checksums: the checksum of a concatenation
// from the checksums of its parts and their lengths, without reading the bytes again. A
// produce's batches arrive with checked CRCs; the WAL chunk that holds them takes its
// checksum from theirs.
package crc32c

import "hash/crc32"

// poly is the Castagnoli polynomial, reversed (bit 31 is x^0), as hash/crc32 uses it.
const poly = crc32.Castagnoli

// x2n[k] is x^(2^k) modulo the polynomial.
var x2n [32]uint32

func init() {
	p := uint32(1) << 30 // x^1
	x2n[0] = p
	for k := 1; k < len(x2n); k++ {
		p = multModP(p, p)
		x2n[k] = p
	}
}

// multModP is a·b modulo the polynomial, both reversed. a must not be 0 (every power of x
// modulo the polynomial is not).
func multModP(a, b uint32) uint32 {
	if a == 0 {
		return 0
	}
	var p uint32
	for m := uint32(1) << 31; ; m >>= 1 {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				return p
			}
		}
		if b&1 != 0 {
			b = b>>1 ^ poly
		} else {
			b >>= 1
		}
	}
}

// x2nModP is x^(n·2^k) modulo the polynomial.
func x2nModP(n uint64, k uint) uint32 {
	p := uint32(1) << 31 // x^0
	for ; n != 0; n >>= 1 {
		if n&1 != 0 {
			p = multModP(x2n[k%uint(len(x2n))], p)
		}
		k++
	}
	return p
}

// Combine returns the CRC-32C of A followed by B, from crcA and crcB (as
// crc32.Checksum(·, crc32.MakeTable(crc32.Castagnoli)) answers them) and the length of B.
// Combine(0, crcB, n) is crcB: 0 is the checksum of nothing.
func Combine(crcA, crcB uint32, lenB int) uint32 {
	if lenB <= 0 {
		return crcA
	}
	// Shifting A's register over lenB zero bytes, then adding B's: the initial and final
	// inversions of A's and B's checksums cancel out.
	return multModP(x2nModP(uint64(lenB), 3), crcA) ^ crcB
}
