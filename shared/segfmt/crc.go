package segfmt

import (
	"hash/crc32"

	"github.com/loamhq/loam/shared/recordbatch"
)

// A batch's index CRC covers the whole batch, but recordbatch.Parse has already checked
// the Kafka CRC over bytes [21, end) of it. crc(A || B) is crc(A) advanced over len(B)
// zero bytes, XOR crc(B) (the register is linear in GF(2); the pre- and post-inversion
// cancel out), so the whole batch's CRC follows from the 21 header bytes and the Kafka
// CRC in O(log n) without a second pass over the batch.

// castagnoliReflected is the Castagnoli polynomial in reflected bit order (bit 31 = x^0).
const castagnoliReflected = crc32.Castagnoli

// mulMod multiplies a and b, polynomials in reflected bit order, modulo the polynomial.
func mulMod(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0 && a != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			a ^= m
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReflected
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow2 holds x^(2^k) modulo the polynomial, k = 0..63, in reflected bit order.
var xPow2 = func() (t [64]uint32) {
	t[0] = 1 << 30 // x^1
	for k := 1; k < len(t); k++ {
		t[k] = mulMod(t[k-1], t[k-1])
	}
	return t
}()

// shiftBytes returns crc advanced over n zero bytes: crc · x^(8n) modulo the polynomial.
func shiftBytes(crc uint32, n int64) uint32 {
	for k := 3; n != 0; k, n = k+1, n>>1 {
		if n&1 != 0 {
			crc = mulMod(xPow2[k%64], crc)
		}
	}
	return crc
}

// crcConcat returns the CRC32C of A || B from crc(A), crc(B) and len(B).
func crcConcat(crcA, crcB uint32, lenB int64) uint32 { return shiftBytes(crcA, lenB) ^ crcB }

// batchCRC is the CRC32C of a whole batch that recordbatch.Parse accepted: its stored
// Kafka CRC covers bytes [21, end).
func batchCRC(b recordbatch.Batch) uint32 {
	const kafkaCRCStart = 21
	return crcConcat(crc32.Checksum(b.Raw[:kafkaCRCStart], castagnoli), b.CRC, int64(len(b.Raw)-kafkaCRCStart))
}
