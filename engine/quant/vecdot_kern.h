// Kernel template: included by vecdot_amd64.c once per instruction-set level, with
//   VD_T     the target attribute of every function (e.g. target("avx2,fma,f16c")),
//   VD(x)    the name of x at this level (vd_x_avx2, vd_x_vnni),
//   VD_VNNI  defined when the AVX-512 VNNI int8 dot may be used.
// No include guard on purpose. Every function is static; vecdot_amd64.c exposes vd_matmul
// and vd_quantize.

static inline VD_T float VD(hsum)(__m256 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

static inline VD_T float VD(f16)(const uint8_t *p) {
	uint16_t h;
	memcpy(&h, p, 2);
	return _cvtsh_ss(h);
}

// dot_us: unsigned bytes u times signed bytes s, four neighbours summed into each int32 lane.
static inline VD_T __m256i VD(dot_us)(__m256i u, __m256i s) {
#ifdef VD_VNNI
	return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
	return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

// dot_ss: signed times signed, by moving x's sign onto y (no value is -128 in y).
static inline VD_T __m256i VD(dot_ss)(__m256i x, __m256i y) {
	return VD(dot_us)(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

// dot_us16: unsigned u times signed s, pairs summed into int16 (no saturation for u < 64),
// then times the int16 scales in sc, pairs summed into int32.
static inline VD_T __m256i VD(dot_us16)(__m256i u, __m256i s, __m256i sc) {
	return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), sc);
}

// shuf16: int16 element lo of v's low 128-bit lane in every int16 of the low lane, and
// element hi of the high lane in every int16 of the high lane (one shuffle). The control
// comes from a table: built in registers, it cost four instructions per use.
static inline VD_T __m256i VD(shuf16)(__m256i v, int lo, int hi) {
	return _mm256_shuffle_epi8(v, _mm256_load_si256((const __m256i *)vd_shuf16_ctrl[lo][hi]));
}

static inline VD_T __m256i VD(load)(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

// prefetch_ahead asks for the cache lines of the bb bytes VD_PREFETCH past p (a weight block).
static inline VD_T void VD(prefetch_ahead)(const uint8_t *p, int bb) {
	for (int o = 0; o < bb; o += 64) _mm_prefetch((const char *)p + VD_PREFETCH + o, _MM_HINT_T0);
}

// nib32: 16 bytes of nibble pairs -> 32 bytes: the low nibbles, then the high nibbles.
static inline VD_T __m256i VD(nib32)(const uint8_t *qs) {
	const __m128i v = _mm_loadu_si128((const __m128i *)qs);
	const __m128i m = _mm_set1_epi8(15);
	return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

// bits32: byte j is 16 where bit j of the little-endian uint32 at p is set, else 0.
static inline VD_T __m256i VD(bits32)(const uint8_t *p) {
	uint32_t x;
	memcpy(&x, p, 4);
	const __m256i sel = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
	                                     2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
	const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), sel);
	v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
	return _mm256_and_si256(v, _mm256_set1_epi8(16));
}

// lut16: the 16-entry int8 codebook in both 128-bit lanes, for _mm256_shuffle_epi8.
static inline VD_T __m256i VD(lut16)(const int8_t *kv) {
	return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kv));
}

// two_bits: each byte of q shifted right by sh bits (sh even, < 8), low two bits kept.
static inline VD_T __m256i VD(two_bits)(__m256i q, int sh) {
	return _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(sh)), _mm256_set1_epi8(3));
}

// mask_bit: byte is v where (byte of h) & m is set, else 0.
static inline VD_T __m256i VD(mask_bit)(__m256i h, int m, char v) {
	const __m256i mv = _mm256_set1_epi8((char)m);
	return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, mv), mv), _mm256_set1_epi8(v));
}

// ---- 32-value blocks against Q8 32-blocks: acc gathers the vector part, corr the scalar
// part (offsets and mins, through the activation block sum as). ----

static inline VD_T void VD(b_q4_0)(const uint8_t *b, const int8_t *aq, float ad, int as, __m256 *acc, float *corr) {
	(void)as;
	(void)corr;
	const __m256i v = _mm256_sub_epi8(VD(nib32)(b + 2), _mm256_set1_epi8(8)); // signed, so the sum stays exact
	*acc = _mm256_fmadd_ps(_mm256_set1_ps(VD(f16)(b) * ad), _mm256_cvtepi32_ps(VD(dot_ss)(v, VD(load)(aq))), *acc);
}

static inline VD_T void VD(b_q4_1)(const uint8_t *b, const int8_t *aq, float ad, int as, __m256 *acc, float *corr) {
	const float s = VD(f16)(b) * ad;
	*acc = _mm256_fmadd_ps(_mm256_set1_ps(s), _mm256_cvtepi32_ps(VD(dot_us)(VD(nib32)(b + 4), VD(load)(aq))), *acc);
	*corr += VD(f16)(b + 2) * ad * (float)as;
}

static inline VD_T void VD(b_q5_0)(const uint8_t *b, const int8_t *aq, float ad, int as, __m256 *acc, float *corr) {
	(void)as;
	(void)corr;
	const __m256i u = _mm256_or_si256(VD(nib32)(b + 6), VD(bits32)(b + 2));
	const __m256i v = _mm256_sub_epi8(u, _mm256_set1_epi8(16));
	*acc = _mm256_fmadd_ps(_mm256_set1_ps(VD(f16)(b) * ad), _mm256_cvtepi32_ps(VD(dot_ss)(v, VD(load)(aq))), *acc);
}

static inline VD_T void VD(b_q5_1)(const uint8_t *b, const int8_t *aq, float ad, int as, __m256 *acc, float *corr) {
	const float s = VD(f16)(b) * ad;
	const __m256i u = _mm256_or_si256(VD(nib32)(b + 8), VD(bits32)(b + 4));
	*acc = _mm256_fmadd_ps(_mm256_set1_ps(s), _mm256_cvtepi32_ps(VD(dot_us)(u, VD(load)(aq))), *acc);
	*corr += VD(f16)(b + 2) * ad * (float)as;
}

static inline VD_T void VD(b_q8_0)(const uint8_t *b, const int8_t *aq, float ad, int as, __m256 *acc, float *corr) {
	(void)as;
	(void)corr;
	const float s = VD(f16)(b) * ad;
	*acc = _mm256_fmadd_ps(_mm256_set1_ps(s), _mm256_cvtepi32_ps(VD(dot_ss)(VD(load)(b + 2), VD(load)(aq))), *acc);
}

static inline VD_T void VD(b_iq4_nl)(const uint8_t *b, const int8_t *aq, float ad, int as, __m256 *acc, float *corr) {
	(void)as;
	(void)corr;
	const float s = VD(f16)(b) * ad;
	const __m256i v = _mm256_shuffle_epi8(VD(lut16)(vd_kv_iq4nl), VD(nib32)(b + 2));
	*acc = _mm256_fmadd_ps(_mm256_set1_ps(s), _mm256_cvtepi32_ps(VD(dot_ss)(v, VD(load)(aq))), *acc);
}

static inline VD_T void VD(b_mxfp4)(const uint8_t *b, const int8_t *aq, float ad, int as, __m256 *acc, float *corr) {
	(void)as;
	(void)corr;
	const float s = vd_e8m0_half(b[0]) * ad;
	const __m256i v = _mm256_shuffle_epi8(VD(lut16)(vd_kv_mxfp4), VD(nib32)(b + 1));
	*acc = _mm256_fmadd_ps(_mm256_set1_ps(s), _mm256_cvtepi32_ps(VD(dot_ss)(v, VD(load)(aq))), *acc);
}

// ---- 256-value blocks against Q8_K blocks (bs: sixteen 16-value sums). ----

static inline VD_T void VD(b_q2_k)(const uint8_t *b, const int8_t *aq, float ad, const int16_t *bs, __m256 *acc, float *corr) {
	(void)corr;
	const __m128i sv = _mm_loadu_si128((const __m128i *)b), m4 = _mm_set1_epi8(15);
	const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sv, m4));
	const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sv, 4), m4));
	const __m256 mins = _mm256_cvtepi32_ps(_mm256_madd_epi16(m16, VD(load)(bs)));
	const uint8_t *qs = b + 16;
	__m256i isum = _mm256_setzero_si256();
	for (int h = 0; h < 2; h++) {
		const __m256i q = VD(load)(qs + 32 * h);
		const __m256i s = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00) : _mm256_permute2x128_si256(sc16, sc16, 0x11);
		for (int j = 0; j < 4; j++) {
			isum = _mm256_add_epi32(isum, VD(dot_us16)(VD(two_bits)(q, 2 * j), VD(load)(aq + 128 * h + 32 * j),
			                                          VD(shuf16)(s, 2 * j, 2 * j + 1)));
		}
	}
	*acc = _mm256_fmadd_ps(_mm256_set1_ps(VD(f16)(b + 80) * ad), _mm256_cvtepi32_ps(isum), *acc);
	*acc = _mm256_fnmadd_ps(_mm256_set1_ps(VD(f16)(b + 82) * ad), mins, *acc);
}

static inline VD_T void VD(b_q3_k)(const uint8_t *b, const int8_t *aq, float ad, const int16_t *bs, __m256 *acc, float *corr) {
	(void)corr;
	// The sixteen 6-bit scales: low nibbles from bytes 0..7, two high bits each from 8..11.
	uint32_t w[3];
	memcpy(w, b + 96, 12);
	const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
	const __m128i s8 = _mm_setr_epi32((int)((w[0] & m4) | (w[2] & m2) << 4), (int)((w[1] & m4) | ((w[2] >> 2) & m2) << 4),
	                                  (int)(((w[0] >> 4) & m4) | ((w[2] >> 4) & m2) << 4),
	                                  (int)(((w[1] >> 4) & m4) | ((w[2] >> 6) & m2) << 4));
	const __m256i sc16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(s8), _mm256_set1_epi16(32));
	// The -4 offset of values whose hmask bit is clear, exactly: start at -4 * sum(scale *
	// group sum) and add 4 back through the hmask bits below.
	__m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sc16, VD(load)(bs)), 2));
	const uint8_t *qs = b + 32;
	const __m256i hm = VD(load)(b);
	for (int h = 0; h < 2; h++) {
		const __m256i q = VD(load)(qs + 32 * h);
		const __m256i s = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00) : _mm256_permute2x128_si256(sc16, sc16, 0x11);
		for (int j = 0; j < 4; j++) {
			const __m256i u = _mm256_or_si256(VD(two_bits)(q, 2 * j), VD(mask_bit)(hm, 1 << (4 * h + j), 4));
			isum = _mm256_add_epi32(isum, VD(dot_us16)(u, VD(load)(aq + 128 * h + 32 * j), VD(shuf16)(s, 2 * j, 2 * j + 1)));
		}
	}
	*acc = _mm256_fmadd_ps(_mm256_set1_ps(VD(f16)(b + 108) * ad), _mm256_cvtepi32_ps(isum), *acc);
}

static inline VD_T void VD(b_q45_k)(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, const int8_t *aq, float ad,
                                    const int16_t *bs, __m256 *acc, float *corr) {
	(void)corr;
	// The 6-bit scales and mins, unpacked four at a time in 32-bit words.
	uint32_t w[3]; // three loads: gcc sent one 12-byte memcpy through the stack
	memcpy(&w[0], b + 4, 4);
	memcpy(&w[1], b + 8, 4);
	memcpy(&w[2], b + 12, 4);
	const uint32_t sc_lo = w[0] & 0x3f3f3f3fu, m_lo = w[1] & 0x3f3f3f3fu;
	const uint32_t sc_hi = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 2) & 0x30303030u);
	const uint32_t m_hi = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 2) & 0x30303030u);
	const __m128i sm = _mm_set_epi32((int)m_hi, (int)m_lo, (int)sc_hi, (int)sc_lo); // 8 scales, 8 mins
	const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
	// Mins times the activation sums of their 32 values, as floats.
	const __m256i bsp = _mm256_madd_epi16(VD(load)(bs), _mm256_set1_epi16(1));
	const __m256 mins = _mm256_cvtepi32_ps(_mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8)), bsp));
	const __m256i m4 = _mm256_set1_epi8(15);
	const __m256i hb = qh ? VD(load)(qh) : _mm256_setzero_si256();
	__m256i isum = _mm256_setzero_si256();
	for (int p = 0; p < 4; p++) {
		const __m256i q = VD(load)(qs + 32 * p);
		__m256i lo = _mm256_and_si256(q, m4);
		__m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
		if (qh) {
			lo = _mm256_or_si256(lo, VD(mask_bit)(hb, 1 << (2 * p), 16));
			hi = _mm256_or_si256(hi, VD(mask_bit)(hb, 2 << (2 * p), 16));
		}
		isum = _mm256_add_epi32(isum, VD(dot_us16)(lo, VD(load)(aq + 64 * p), VD(shuf16)(sc16, 2 * p, 2 * p)));
		isum = _mm256_add_epi32(isum, VD(dot_us16)(hi, VD(load)(aq + 64 * p + 32), VD(shuf16)(sc16, 2 * p + 1, 2 * p + 1)));
	}
	*acc = _mm256_fmadd_ps(_mm256_set1_ps(VD(f16)(b) * ad), _mm256_cvtepi32_ps(isum), *acc);
	*acc = _mm256_fnmadd_ps(_mm256_set1_ps(VD(f16)(b + 2) * ad), mins, *acc);
}

static inline VD_T void VD(b_q5_k)(const uint8_t *b, const int8_t *aq, float ad, const int16_t *bs, __m256 *acc, float *corr) {
	VD(b_q45_k)(b, b + 16, b + 48, aq, ad, bs, acc, corr);
}

static inline VD_T void VD(b_q6_k)(const uint8_t *b, const int8_t *aq, float ad, const int16_t *bs, __m256 *acc, float *corr) {
	(void)corr;
	const uint8_t *ql = b, *qh = b + 128;
	const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192)));
	// The -32 offset, exactly: isum starts at -32 * sum(scale * group sum).
	__m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sc16, VD(load)(bs)), 5));
	const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
	for (int h = 0; h < 2; h++) {
		const __m256i l0 = VD(load)(ql + 64 * h), l1 = VD(load)(ql + 64 * h + 32), hv = VD(load)(qh + 32 * h);
		const __m256i u0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hv, 4), m30));
		const __m256i u1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hv, 2), m30));
		const __m256i u2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hv, m30));
		const __m256i u3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
		                                   _mm256_and_si256(_mm256_srli_epi16(hv, 2), m30));
		const int8_t *a = aq + 128 * h;
		// Scales 8h..8h+7 in both 128-bit lanes.
		const __m256i s = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00) : _mm256_permute2x128_si256(sc16, sc16, 0x11);
		isum = _mm256_add_epi32(isum, VD(dot_us16)(u0, VD(load)(a), VD(shuf16)(s, 0, 1)));
		isum = _mm256_add_epi32(isum, VD(dot_us16)(u1, VD(load)(a + 32), VD(shuf16)(s, 2, 3)));
		isum = _mm256_add_epi32(isum, VD(dot_us16)(u2, VD(load)(a + 64), VD(shuf16)(s, 4, 5)));
		isum = _mm256_add_epi32(isum, VD(dot_us16)(u3, VD(load)(a + 96), VD(shuf16)(s, 6, 7)));
	}
	*acc = _mm256_fmadd_ps(_mm256_set1_ps(VD(f16)(b + 208) * ad), _mm256_cvtepi32_ps(isum), *acc);
}

static inline VD_T void VD(b_iq4_xs)(const uint8_t *b, const int8_t *aq, float ad, const int16_t *bs, __m256 *acc, float *corr) {
	(void)bs;
	(void)corr;
	// The eight 6-bit scales: low nibbles from scales_l, two high bits each from scales_h.
	uint16_t sh;
	uint32_t sl;
	memcpy(&sh, b + 2, 2);
	memcpy(&sl, b + 4, 4);
	const __m128i lo = _mm_unpacklo_epi8(_mm_cvtsi32_si128((int)(sl & 0x0f0f0f0fu)), _mm_cvtsi32_si128((int)((sl >> 4) & 0x0f0f0f0fu)));
	const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(sh), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
	                                    _mm256_set1_epi32(3));
	const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(_mm256_cvtepu8_epi32(lo), _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
	const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_packs_epi32(_mm256_castsi256_si128(ls), _mm256_extracti128_si256(ls, 1)));
	const uint8_t *qs = b + 8;
	const __m256i lut = VD(lut16)(vd_kv_iq4nl);
	__m256i isum = _mm256_setzero_si256();
	for (int ib = 0; ib < 8; ib++) {
		const __m256i v = _mm256_shuffle_epi8(lut, VD(nib32)(qs + 16 * ib));
		const __m256i a = VD(load)(aq + 32 * ib);
		isum = _mm256_add_epi32(isum, VD(dot_us16)(_mm256_sign_epi8(v, v), _mm256_sign_epi8(a, v), VD(shuf16)(sc16, ib, ib)));
	}
	*acc = _mm256_fmadd_ps(_mm256_set1_ps(VD(f16)(b) * ad), _mm256_cvtepi32_ps(isum), *acc);
}

// ---- The IQ2/IQ3 grid types (iq2.go, iq3.go): per 32 values the grid entries (unsigned
// bytes) are gathered from the tables, the signs go onto the activations, and the integer
// dots are summed times each group's odd scale 2s+1; the float scale comes once per block,
// as vdRefBlockIQ does. ----

// sign_bytes: byte j of the result is -1 where bit j of the little-endian uint32 s is set,
// else +1 (for _mm256_sign_epi8).
static inline VD_T __m256i VD(sign_bytes)(uint32_t s) {
	const __m256i sel = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
	                                     2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
	const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)s), sel);
	v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
	return _mm256_or_si256(v, _mm256_set1_epi8(1));
}

// ksigns32: the signs of four 7-bit sign indices (bits 7l..7l+6 of aux; each byte's 8th the
// parity of its 7) as -1/+1 bytes, from the table.
static inline VD_T __m256i VD(ksigns32)(uint32_t aux) {
	return _mm256_setr_epi64x((long long)vd_ksigns_bytes[aux & 127], (long long)vd_ksigns_bytes[(aux >> 7) & 127],
	                          (long long)vd_ksigns_bytes[(aux >> 14) & 127], (long long)vd_ksigns_bytes[(aux >> 21) & 127]);
}

// iq_dot32: the 32 grid bytes g against activations a with the signs sg (-1/+1 bytes), the
// pairs of int16 products times the int16 scales sc summed into eight int32 lanes (lanes 0-3
// values 0..15, lanes 4-7 values 16..31). No int16 overflows: |g| <= 62, |a| <= 127.
static inline VD_T __m256i VD(iq_dot32)(__m256i g, const int8_t *a, __m256i sg, __m256i sc) {
	return VD(dot_us16)(g, _mm256_sign_epi8(VD(load)(a), sg), sc);
}

#define VD_AI __attribute__((always_inline))

// iq_unpack32 unpacks 32-value group ib of an IQ block b: the grid bytes g, their signs sg
// (-1/+1 bytes) and the odd scale of each half (s0: values 0..15, s1: 16..31), for the grid
// types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S. Their row kernels and i256_dec share it.
static inline VD_T VD_AI void VD(iq_unpack32)(const int TYPE, const uint8_t *b, int ib, __m256i *g, __m256i *sg, int *s0, int *s1) {
	switch (TYPE) {
	case VD_IQ2_XXS: {
		const uint8_t *q = b + 2 + 8 * ib;
		uint32_t aux;
		memcpy(&aux, q + 4, 4);
		*g = _mm256_setr_epi64x((long long)vd_iq2xxs_grid[q[0]], (long long)vd_iq2xxs_grid[q[1]],
		                        (long long)vd_iq2xxs_grid[q[2]], (long long)vd_iq2xxs_grid[q[3]]);
		*sg = VD(ksigns32)(aux);
		*s0 = *s1 = 2 * (int)(aux >> 28) + 1;
		break;
	}
	case VD_IQ2_XS: {
		uint16_t q[4];
		memcpy(q, b + 2 + 8 * ib, 8);
		*sg = _mm256_setr_epi64x((long long)vd_ksigns_bytes[q[0] >> 9], (long long)vd_ksigns_bytes[q[1] >> 9],
		                         (long long)vd_ksigns_bytes[q[2] >> 9], (long long)vd_ksigns_bytes[q[3] >> 9]);
		*g = _mm256_setr_epi64x((long long)vd_iq2xs_grid[q[0] & 511], (long long)vd_iq2xs_grid[q[1] & 511],
		                        (long long)vd_iq2xs_grid[q[2] & 511], (long long)vd_iq2xs_grid[q[3] & 511]);
		*s0 = 2 * (b[66 + ib] & 15) + 1, *s1 = 2 * (b[66 + ib] >> 4) + 1;
		break;
	}
	case VD_IQ2_S: {
		const uint8_t *qs = b + 2 + 4 * ib;
		const int qh = b[66 + ib];
		uint32_t s;
		memcpy(&s, b + 34 + 4 * ib, 4);
		*g = _mm256_setr_epi64x((long long)vd_iq2s_grid[qs[0] | ((qh << 8) & 0x300)],
		                        (long long)vd_iq2s_grid[qs[1] | ((qh << 6) & 0x300)],
		                        (long long)vd_iq2s_grid[qs[2] | ((qh << 4) & 0x300)],
		                        (long long)vd_iq2s_grid[qs[3] | ((qh << 2) & 0x300)]);
		*sg = VD(sign_bytes)(s);
		*s0 = 2 * (b[74 + ib] & 15) + 1, *s1 = 2 * (b[74 + ib] >> 4) + 1;
		break;
	}
	case VD_IQ3_XXS: {
		const uint8_t *q = b + 2 + 8 * ib;
		uint32_t aux;
		memcpy(&aux, b + 66 + 4 * ib, 4);
		*g = _mm256_setr_epi32((int)vd_iq3xxs_grid[q[0]], (int)vd_iq3xxs_grid[q[1]], (int)vd_iq3xxs_grid[q[2]],
		                       (int)vd_iq3xxs_grid[q[3]], (int)vd_iq3xxs_grid[q[4]], (int)vd_iq3xxs_grid[q[5]],
		                       (int)vd_iq3xxs_grid[q[6]], (int)vd_iq3xxs_grid[q[7]]);
		*sg = VD(ksigns32)(aux);
		*s0 = *s1 = 2 * (int)(aux >> 28) + 1;
		break;
	}
	case VD_IQ3_S: {
		const uint8_t *q = b + 2 + 8 * ib;
		const int qh = b[66 + ib];
		uint32_t s;
		memcpy(&s, b + 74 + 4 * ib, 4);
		*g = _mm256_setr_epi32(
			(int)vd_iq3s_grid[q[0] | ((qh << 8) & 256)], (int)vd_iq3s_grid[q[1] | ((qh << 7) & 256)],
			(int)vd_iq3s_grid[q[2] | ((qh << 6) & 256)], (int)vd_iq3s_grid[q[3] | ((qh << 5) & 256)],
			(int)vd_iq3s_grid[q[4] | ((qh << 4) & 256)], (int)vd_iq3s_grid[q[5] | ((qh << 3) & 256)],
			(int)vd_iq3s_grid[q[6] | ((qh << 2) & 256)], (int)vd_iq3s_grid[q[7] | ((qh << 1) & 256)]);
		*sg = VD(sign_bytes)(s);
		*s0 = *s1 = 2 * ((b[106 + ib / 2] >> (4 * (ib & 1))) & 15) + 1;
		break;
	}
	}
}

// iq_scale is the factor a grid type's block scale d takes beside the group scales.
static inline VD_T VD_AI float VD(iq_scale)(const int TYPE) {
	return TYPE == VD_IQ2_XXS || TYPE == VD_IQ2_XS || TYPE == VD_IQ2_S ? 0.125f : TYPE == VD_IQ3_XXS ? 0.25f : 1.f;
}

// b_iq_grid is the row kernel of the grid types: each 32-value group unpacked by
// iq_unpack32 and multiplied by the activations with its signs and the scales of its halves.
static inline VD_T VD_AI void VD(b_iq_grid)(const int TYPE, const uint8_t *b, const int8_t *aq, float ad, __m256 *acc) {
	__m256i isum = _mm256_setzero_si256();
	for (int ib = 0; ib < 8; ib++) {
		__m256i g, sg;
		int s0, s1;
		VD(iq_unpack32)(TYPE, b, ib, &g, &sg, &s0, &s1);
		const __m256i sc = _mm256_set_m128i(_mm_set1_epi16((short)s1), _mm_set1_epi16((short)s0));
		isum = _mm256_add_epi32(isum, VD(iq_dot32)(g, aq + 32 * ib, sg, sc));
	}
	*acc = _mm256_fmadd_ps(_mm256_set1_ps(VD(f16)(b) * ad * VD(iq_scale)(TYPE)), _mm256_cvtepi32_ps(isum), *acc);
}

static inline VD_T void VD(b_iq2_xxs)(const uint8_t *b, const int8_t *aq, float ad, const int16_t *bs, __m256 *acc, float *corr) {
	(void)bs;
	(void)corr;
	VD(b_iq_grid)(VD_IQ2_XXS, b, aq, ad, acc);
}

static inline VD_T void VD(b_iq2_xs)(const uint8_t *b, const int8_t *aq, float ad, const int16_t *bs, __m256 *acc, float *corr) {
	(void)bs;
	(void)corr;
	VD(b_iq_grid)(VD_IQ2_XS, b, aq, ad, acc);
}

static inline VD_T void VD(b_iq2_s)(const uint8_t *b, const int8_t *aq, float ad, const int16_t *bs, __m256 *acc, float *corr) {
	(void)bs;
	(void)corr;
	VD(b_iq_grid)(VD_IQ2_S, b, aq, ad, acc);
}

static inline VD_T void VD(b_iq3_xxs)(const uint8_t *b, const int8_t *aq, float ad, const int16_t *bs, __m256 *acc, float *corr) {
	(void)bs;
	(void)corr;
	VD(b_iq_grid)(VD_IQ3_XXS, b, aq, ad, acc);
}

static inline VD_T void VD(b_iq3_s)(const uint8_t *b, const int8_t *aq, float ad, const int16_t *bs, __m256 *acc, float *corr) {
	(void)bs;
	(void)corr;
	VD(b_iq_grid)(VD_IQ3_S, b, aq, ad, acc);
}

// ---- Q4_K/Q5_K against up to four activation rows at once (n > 1): the weight block is
// decoded once into u (codes) and s (int16 scales), then dotted with each row. (Q6_K gained
// nothing this way on AVX2: its decode is cheap beside the dots.) ----

// dots8: one activation block (256 values) against the decoded codes and scales.
static inline VD_T __m256i VD(dots8)(const __m256i u[8], const __m256i s[8], const int8_t *aq) {
	__m256i isum = _mm256_setzero_si256();
	for (int j = 0; j < 8; j++) isum = _mm256_add_epi32(isum, VD(dot_us16)(u[j], VD(load)(aq + 32 * j), s[j]));
	return isum;
}

static inline VD_T void VD(m_q45_k)(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, int na, const int8_t *const *aq,
                                    const float *ad, const int16_t *const *bs, __m256 *acc) {
	uint32_t w[3]; // three loads: gcc sent one 12-byte memcpy through the stack
	memcpy(&w[0], b + 4, 4);
	memcpy(&w[1], b + 8, 4);
	memcpy(&w[2], b + 12, 4);
	const uint32_t sc_lo = w[0] & 0x3f3f3f3fu, m_lo = w[1] & 0x3f3f3f3fu;
	const uint32_t sc_hi = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 2) & 0x30303030u);
	const uint32_t m_hi = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 2) & 0x30303030u);
	const __m128i sm = _mm_set_epi32((int)m_hi, (int)m_lo, (int)sc_hi, (int)sc_lo);
	const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
	const __m256i m32 = _mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8));
	const __m256i m4 = _mm256_set1_epi8(15);
	const __m256i hb = qh ? VD(load)(qh) : _mm256_setzero_si256();
	__m256i u[8], s[8];
	for (int p = 0; p < 4; p++) {
		const __m256i q = VD(load)(qs + 32 * p);
		u[2 * p] = _mm256_and_si256(q, m4);
		u[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
		if (qh) {
			u[2 * p] = _mm256_or_si256(u[2 * p], VD(mask_bit)(hb, 1 << (2 * p), 16));
			u[2 * p + 1] = _mm256_or_si256(u[2 * p + 1], VD(mask_bit)(hb, 2 << (2 * p), 16));
		}
		s[2 * p] = VD(shuf16)(sc16, 2 * p, 2 * p);
		s[2 * p + 1] = VD(shuf16)(sc16, 2 * p + 1, 2 * p + 1);
	}
	const float d = VD(f16)(b), dmin = VD(f16)(b + 2);
	for (int k = 0; k < na; k++) {
		const __m256i bsp = _mm256_madd_epi16(VD(load)(bs[k]), _mm256_set1_epi16(1));
		const __m256 mins = _mm256_cvtepi32_ps(_mm256_mullo_epi32(m32, bsp));
		acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(d * ad[k]), _mm256_cvtepi32_ps(VD(dots8)(u, s, aq[k])), acc[k]);
		acc[k] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * ad[k]), mins, acc[k]);
	}
}

static inline VD_T void VD(m_q5_k)(const uint8_t *b, int na, const int8_t *const *aq, const float *ad, const int16_t *const *bs,
                                   __m256 *acc) {
	VD(m_q45_k)(b, b + 16, b + 48, na, aq, ad, bs, acc);
}

// ---- Q4_K in tiles of R weight rows x T activation rows (R <= 2, T <= 4), for decode and
// prefill alike: each weight chunk is unpacked once for T rows, each activation chunk is
// loaded once for R rows, and R*T int32 sums stay in registers (AVX2 has sixteen). Every
// (row, activation) pair sees the same operations in the same order whatever the tile, so
// results do not depend on how the pool splits the rows. ----

// VD_PIN(v): v is in a register here. Without it gcc summed pairs of chunks before adding
// them to the tile's sums and loaded each activation chunk once per weight row, which left
// sums on the stack (llvm-mca -mcpu=znver3: 97 -> 78 cycles a block for the 2x4 tile;
// 768x2048 expert matrices from DRAM, 64 rows, one Zen 3 thread: 49 -> 58 GMAC/s median).
#ifndef VD_PIN
#define VD_PIN(v) __asm__("" : "+x"(v))
#endif
// VD_UNROLL: unroll the loop that follows completely (every loop it marks has at most 8 turns).
#define VD_UNROLL _Pragma("GCC unroll 8")

// The largest tile (VD_Q4K_R <= 4 rows, VD_Q4K_T <= 6 activation rows).
#ifndef VD_Q4K_R
#define VD_Q4K_R 2
#endif
#ifndef VD_Q4K_T
#define VD_Q4K_T 4
#endif

// q4k_sm: a Q4_K block's eight 6-bit scales and eight mins, as int16.
static inline VD_T VD_AI void VD(q4k_sm)(const uint8_t *b, __m128i *sc, __m128i *mn) {
	uint32_t w[3]; // three loads: gcc sent one 12-byte memcpy through the stack
	memcpy(&w[0], b + 4, 4);
	memcpy(&w[1], b + 8, 4);
	memcpy(&w[2], b + 12, 4);
	const uint32_t sc_lo = w[0] & 0x3f3f3f3fu, m_lo = w[1] & 0x3f3f3f3fu;
	const uint32_t sc_hi = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 2) & 0x30303030u);
	const uint32_t m_hi = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 2) & 0x30303030u);
	*sc = _mm_cvtepu8_epi16(_mm_setr_epi32((int)sc_lo, (int)sc_hi, 0, 0));
	*mn = _mm_cvtepu8_epi16(_mm_setr_epi32((int)m_lo, (int)m_hi, 0, 0));
}

// q4k_fsum: an activation block's sums per 32 values (from its sixteen 16-value sums bs),
// times its scale ad.
static inline VD_T VD_AI __m256 VD(q4k_fsum)(const int16_t *bs, float ad) {
	const __m128i s32 = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bs), _mm_loadu_si128((const __m128i *)(bs + 8)));
	return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(s32)), _mm256_set1_ps(ad));
}

// q4k_fm: a weight block's mins (mn, from q4k_sm) times its dmin.
static inline VD_T VD_AI __m256 VD(q4k_fm)(__m128i mn, const uint8_t *blk) {
	return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(mn)), _mm256_set1_ps(VD(f16)(blk + 2)));
}

// q4k_prep decodes the nb blocks of weight rows r..r+R-1 into pre.
static VD_T void VD(q4k_prep)(int R, const uint8_t *w, int64_t rb, int64_t nb, int64_t r, vd_q4k_pre *pre) {
	for (int rr = 0; rr < R; rr++) {
		for (int64_t b = 0; b < nb; b++) {
			const uint8_t *blk = w + (r + rr) * rb + b * 144;
			VD(prefetch_ahead)(blk, 144); // the first touch of these rows: stream them from here
			vd_q4k_pre *o = &pre[rr * nb + b];
			__m128i sc, mn;
			VD(q4k_sm)(blk, &sc, &mn);
			_mm_storeu_si128((__m128i *)o->sc, sc);
			_mm256_storeu_ps(o->fm, VD(q4k_fm)(mn, blk));
			o->d = VD(f16)(blk);
		}
	}
}

// q4k_tile: rows r..r+R-1 against activation rows i0..i0+T-1, into y. R and T are constants
// at every call and every loop is unrolled (VD_UNROLL), so the arrays below become
// registers, and the loop takes one 32-value chunk at a time, so few values live at once.
// Left to itself gcc kept sums on the stack (see VD_PIN too): the tile ran at 46.6 GMAC/s (-O3) against 56.9
// now (n=64, a 768x2048 matrix, one Zen 3 thread); llvm-mca still counts some spills.
// With pre (R rows x nb blocks, see q4k_prep) and fsum (q4k_fsums), the scales, mins and
// activation sums come decoded; without, the tile decodes them itself. Same values either way.
static inline VD_T VD_AI void VD(q4k_tile)(const int R, const int T, const uint8_t *w, int64_t rb, const vd_act *a,
                                           int64_t r, int64_t i0, float *y, int64_t ldy, const vd_q4k_pre *pre,
                                           const float *fsum) {
	const int64_t nb = a->cols / 256;
	const __m256i m4 = _mm256_set1_epi8(15);
	__m256 acc[VD_Q4K_R][VD_Q4K_T];
	VD_UNROLL
	for (int rr = 0; rr < R; rr++)
		VD_UNROLL
		for (int t = 0; t < T; t++) acc[rr][t] = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const int8_t *aq[VD_Q4K_T];
		VD_UNROLL
		for (int t = 0; t < T; t++) aq[t] = a->q + (i0 + t) * a->cols + b * 256;
		const uint8_t *blk[VD_Q4K_R];
		__m256i sc16[VD_Q4K_R];
		__m128i mn[VD_Q4K_R];
		VD_UNROLL
		for (int rr = 0; rr < R; rr++) {
			blk[rr] = w + (r + rr) * rb + b * 144;
			VD(prefetch_ahead)(blk[rr], 144);
			if (!pre) {
				__m128i sc;
				VD(q4k_sm)(blk[rr], &sc, &mn[rr]);
				sc16[rr] = _mm256_broadcastsi128_si256(sc);
			}
		}
		__m256i isum[VD_Q4K_R][VD_Q4K_T];
		VD_UNROLL
		for (int rr = 0; rr < R; rr++)
			VD_UNROLL
			for (int t = 0; t < T; t++) isum[rr][t] = _mm256_setzero_si256();
		// One 32-value chunk at a time: its codes and scale per weight row, then every
		// activation row against them. Few values live at once, so the sums stay in registers.
		VD_UNROLL
		for (int c = 0; c < 8; c++) {
			__m256i u[VD_Q4K_R], s[VD_Q4K_R];
			VD_UNROLL
			for (int rr = 0; rr < R; rr++) {
				const __m256i q = VD(load)(blk[rr] + 16 + 32 * (c / 2));
				u[rr] = _mm256_and_si256(c & 1 ? _mm256_srli_epi16(q, 4) : q, m4);
				s[rr] = pre ? _mm256_set1_epi16(pre[rr * nb + b].sc[c]) : VD(shuf16)(sc16[rr], c, c);
			}
			VD_UNROLL
			for (int t = 0; t < T; t++) {
				__m256i av = VD(load)(aq[t] + 32 * c);
				VD_PIN(av);
				VD_UNROLL
				for (int rr = 0; rr < R; rr++) {
					isum[rr][t] = _mm256_add_epi32(isum[rr][t], VD(dot_us16)(u[rr], av, s[rr]));
					VD_PIN(isum[rr][t]);
				}
			}
		}
		// Scales and mins are applied here, not loaded before the loop above, which needs
		// every register it can get.
		__m256 fs[VD_Q4K_T]; // activation sums per 32 values, times the activation scale
		float ad[VD_Q4K_T];
		VD_UNROLL
		for (int t = 0; t < T; t++) {
			const int64_t ib = (i0 + t) * nb + b;
			ad[t] = a->d[ib];
			fs[t] = fsum ? _mm256_loadu_ps(fsum + ib * 8) : VD(q4k_fsum)(a->s + ib * 16, ad[t]);
		}
		VD_UNROLL
		for (int rr = 0; rr < R; rr++) {
			const float d = pre ? pre[rr * nb + b].d : VD(f16)(blk[rr]);
			const __m256 fm = pre ? _mm256_loadu_ps(pre[rr * nb + b].fm) : VD(q4k_fm)(mn[rr], blk[rr]);
			VD_UNROLL
			for (int t = 0; t < T; t++) {
				acc[rr][t] = _mm256_fmadd_ps(_mm256_set1_ps(d * ad[t]), _mm256_cvtepi32_ps(isum[rr][t]), acc[rr][t]);
				acc[rr][t] = _mm256_fnmadd_ps(fm, fs[t], acc[rr][t]);
			}
		}
	}
	VD_UNROLL
	for (int rr = 0; rr < R; rr++)
		VD_UNROLL
		for (int t = 0; t < T; t++) y[(i0 + t) * ldy + r + rr] = VD(hsum)(acc[rr][t]);
}

// q4k_rows: rows [r, r+R) against every activation row, VD_Q4K_T at a time.
static inline VD_T VD_AI void VD(q4k_rows)(const int R, const uint8_t *w, int64_t rb, const vd_act *a, int64_t r, float *y,
                                           int64_t ldy, const vd_q4k_pre *pre, const float *fsum) {
	int64_t i = 0;
	for (; i + VD_Q4K_T <= a->n; i += VD_Q4K_T) VD(q4k_tile)(R, VD_Q4K_T, w, rb, a, r, i, y, ldy, pre, fsum);
	switch (a->n - i) {
#if VD_Q4K_T > 5
	case 5: VD(q4k_tile)(R, 5, w, rb, a, r, i, y, ldy, pre, fsum); break;
#endif
#if VD_Q4K_T > 4
	case 4: VD(q4k_tile)(R, 4, w, rb, a, r, i, y, ldy, pre, fsum); break;
#endif
#if VD_Q4K_T > 3
	case 3: VD(q4k_tile)(R, 3, w, rb, a, r, i, y, ldy, pre, fsum); break;
#endif
#if VD_Q4K_T > 2
	case 2: VD(q4k_tile)(R, 2, w, rb, a, r, i, y, ldy, pre, fsum); break;
#endif
	case 1: VD(q4k_tile)(R, 1, w, rb, a, r, i, y, ldy, pre, fsum); break;
	}
}

// q4k_rows_pre: q4k_rows with each row's blocks decoded once, not once per group of
// activation rows, when there is room for that (pre holds VD_Q4K_R rows; NULL: no room).
static inline VD_T VD_AI void VD(q4k_rows_pre)(const int R, const uint8_t *w, int64_t rb, const vd_act *a, int64_t r,
                                               float *y, int64_t ldy, vd_q4k_pre *pre, const float *fsum) {
	if (pre) VD(q4k_prep)(R, w, rb, a->cols / 256, r, pre);
	VD(q4k_rows)(R, w, rb, a, r, y, ldy, pre, fsum);
}

// mv_q4_k: mmt_q4_k for one activation row (decode), the tile of one row by one written
// out with every shuffle control held in a register. In the general tile gcc kept them on
// the stack and loaded the weights twice: llvm-mca -mcpu=znver3 put the block at 20 cycles,
// bound by vector loads. The arithmetic is the tile's, in the same order, so the results
// are the same bits. fsum (may be NULL) holds the activation sums per 32 values times the
// block's scale (q4k_fsum).
static VD_T void VD(mv_q4_k)(const uint8_t *w, int64_t rb, const vd_act *a, const float *fsum, float *y, int64_t r0,
                             int64_t r1) {
	const int64_t nb = a->cols / 256;
	const __m256i m4 = _mm256_set1_epi8(15);
	__m256i c[8]; // constant indexes below, so these stay in registers
	for (int j = 0; j < 8; j++) c[j] = VD(load)(vd_shuf16_ctrl[j][j]);
	for (int64_t r = r0; r < r1; r++) {
		__m256 acc = _mm256_setzero_ps();
		for (int64_t b = 0; b < nb; b++) {
			const uint8_t *blk = w + r * rb + b * 144;
			const int8_t *aq = a->q + b * 256;
			VD(prefetch_ahead)(blk, 144);
			__m128i sc128, mn;
			VD(q4k_sm)(blk, &sc128, &mn);
			const __m256i sc = _mm256_broadcastsi128_si256(sc128);
			__m256i isum = _mm256_setzero_si256();
			for (int p = 0; p < 4; p++) {
				__m256i q = VD(load)(blk + 16 + 32 * p);
				VD_PIN(q); // else gcc loads it twice: once for each nibble
				isum = _mm256_add_epi32(isum, VD(dot_us16)(_mm256_and_si256(q, m4), VD(load)(aq + 64 * p), _mm256_shuffle_epi8(sc, c[2 * p])));
				isum = _mm256_add_epi32(isum, VD(dot_us16)(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), VD(load)(aq + 64 * p + 32),
				                                           _mm256_shuffle_epi8(sc, c[2 * p + 1])));
			}
			const float ad = a->d[b];
			const __m256 fs = fsum ? _mm256_loadu_ps(fsum + b * 8) : VD(q4k_fsum)(a->s + b * 16, ad);
			acc = _mm256_fmadd_ps(_mm256_set1_ps(VD(f16)(blk) * ad), _mm256_cvtepi32_ps(isum), acc);
			acc = _mm256_fnmadd_ps(VD(q4k_fm)(mn, blk), fs, acc);
		}
		y[r] = VD(hsum)(acc);
	}
}

// mmt_q4_k: below VD_Q4K_PRE activation rows, one weight row at a time (one activation row:
// mv_q4_k); from VD_Q4K_PRE rows up, VD_Q4K_R weight rows a tile, with each weight row's
// scales and each activation row's sums decoded once per call (into malloc'd space; without
// it, per tile). Two, not eight: a prefill's MoE gives many experts two to seven rows, and
// those products ran faster decoded once (768x2048 and 2048x768 expert matrices from DRAM,
// one Zen 3 thread: five to seven rows ~20%; three rows 210-280 -> 130 us, where the
// undecoded tile was the slowest of all row counts per value; two rows 1.05-1.19x since the
// scales are kept compact, vd_q4k_pre).
#ifndef VD_Q4K_PRE
#define VD_Q4K_PRE 2
#endif
static VD_T void VD(mmt_q4_k)(const uint8_t *w, int64_t rb, const vd_act *a, float *y, int64_t ldy, int64_t r0, int64_t r1) {
	int64_t r = r0;
	const int64_t nb = a->cols / 256;
	if (a->n < VD_Q4K_PRE) {
		// The activation sums once per call here too (decode: per row they cost about 5%).
		float fbuf[2 * 8 * 64];
		const float *fsum = NULL;
		if (a->n * nb <= 64 * 2) {
			for (int64_t ib = 0; ib < a->n * nb; ib++) _mm256_storeu_ps(fbuf + ib * 8, VD(q4k_fsum)(a->s + ib * 16, a->d[ib]));
			fsum = fbuf;
		}
		if (a->n == 1) {
			VD(mv_q4_k)(w, rb, a, fsum, y, r0, r1);
			return;
		}
		for (; r < r1; r++) VD(q4k_rows)(1, w, rb, a, r, y, ldy, NULL, fsum);
		return;
	}
	vd_q4k_pre *pre = NULL;
	float *fsum = NULL;
	if (a->n >= VD_Q4K_PRE) {
		pre = malloc(sizeof(vd_q4k_pre) * (size_t)(VD_Q4K_R * nb));
		fsum = malloc(sizeof(float) * 8 * (size_t)(a->n * nb));
		if (pre && fsum) {
			for (int64_t ib = 0; ib < a->n * nb; ib++) _mm256_storeu_ps(fsum + ib * 8, VD(q4k_fsum)(a->s + ib * 16, a->d[ib]));
		} else {
			free(pre);
			free(fsum);
			pre = NULL, fsum = NULL;
		}
	}
	for (; r + VD_Q4K_R <= r1; r += VD_Q4K_R) VD(q4k_rows_pre)(VD_Q4K_R, w, rb, a, r, y, ldy, pre, fsum);
	switch (r1 - r) {
#if VD_Q4K_R > 3
	case 3: VD(q4k_rows_pre)(3, w, rb, a, r, y, ldy, pre, fsum); break;
#endif
#if VD_Q4K_R > 2
	case 2: VD(q4k_rows_pre)(2, w, rb, a, r, y, ldy, pre, fsum); break;
#endif
	case 1: VD(q4k_rows_pre)(1, w, rb, a, r, y, ldy, pre, fsum); break;
	}
	free(pre);
	free(fsum);
}


// ---- 32-value blocks against up to four activation rows at once (n > 1): each block is
// decoded once into codes u (for signed types |w|, with the signs in sg) and scales. ----

static inline VD_T vd_dec32 VD(d_q4_0)(const uint8_t *b) {
	const __m256i w = _mm256_sub_epi8(VD(nib32)(b + 2), _mm256_set1_epi8(8));
	return (vd_dec32){_mm256_sign_epi8(w, w), w, VD(f16)(b), 0};
}

static inline VD_T vd_dec32 VD(d_q5_0)(const uint8_t *b) {
	const __m256i w = _mm256_sub_epi8(_mm256_or_si256(VD(nib32)(b + 6), VD(bits32)(b + 2)), _mm256_set1_epi8(16));
	return (vd_dec32){_mm256_sign_epi8(w, w), w, VD(f16)(b), 0};
}

static inline VD_T vd_dec32 VD(d_q8_0)(const uint8_t *b) {
	const __m256i w = VD(load)(b + 2);
	return (vd_dec32){_mm256_sign_epi8(w, w), w, VD(f16)(b), 0};
}

static inline VD_T vd_dec32 VD(d_iq4_nl)(const uint8_t *b) {
	const __m256i w = _mm256_shuffle_epi8(VD(lut16)(vd_kv_iq4nl), VD(nib32)(b + 2));
	return (vd_dec32){_mm256_sign_epi8(w, w), w, VD(f16)(b), 0};
}

static inline VD_T vd_dec32 VD(d_mxfp4)(const uint8_t *b) {
	const __m256i w = _mm256_shuffle_epi8(VD(lut16)(vd_kv_mxfp4), VD(nib32)(b + 1));
	return (vd_dec32){_mm256_sign_epi8(w, w), w, vd_e8m0_half(b[0]), 0};
}

static inline VD_T vd_dec32 VD(d_q4_1)(const uint8_t *b) {
	return (vd_dec32){VD(nib32)(b + 4), _mm256_setzero_si256(), VD(f16)(b), VD(f16)(b + 2)};
}

static inline VD_T vd_dec32 VD(d_q5_1)(const uint8_t *b) {
	return (vd_dec32){_mm256_or_si256(VD(nib32)(b + 8), VD(bits32)(b + 4)), _mm256_setzero_si256(), VD(f16)(b), VD(f16)(b + 2)};
}

// ---- row loops: each weight row is dotted with every activation row. ----

#define VD_ROWS32(NAME, BB)                                                                              \
	static VD_T void VD(mm_##NAME)(const uint8_t *w, int64_t rb, const vd_act *a, float *y, int64_t ldy,  \
	                               int64_t r0, int64_t r1) {                                              \
		const int64_t nb = a->cols / 32;                                                                 \
		for (int64_t r = r0; r < r1; r++) {                                                              \
			const uint8_t *row = w + r * rb;                                                             \
			for (int64_t i = 0; i < a->n; i++) {                                                         \
				const int8_t *aq = a->q + i * a->cols;                                                   \
				const float *ad = a->d + i * nb;                                                         \
				const int16_t *as = a->s + i * nb;                                                       \
				__m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                           \
				float corr = 0;                                                                          \
				int64_t b = 0;                                                                           \
				for (; b + 1 < nb; b += 2) {                                                             \
					_mm_prefetch((const char *)(row + b * BB) + VD_PREFETCH, _MM_HINT_T0);               \
					VD(b_##NAME)(row + b * BB, aq + b * 32, ad[b], as[b], &acc0, &corr);                 \
					VD(b_##NAME)(row + (b + 1) * BB, aq + (b + 1) * 32, ad[b + 1], as[b + 1], &acc1, &corr); \
				}                                                                                        \
				if (b < nb) VD(b_##NAME)(row + b * BB, aq + b * 32, ad[b], as[b], &acc0, &corr);         \
				y[i * ldy + r] = VD(hsum)(_mm256_add_ps(acc0, acc1)) + corr;                             \
			}                                                                                            \
		}                                                                                                \
	}

#define VD_ROWS256(NAME, BB)                                                                             \
	static VD_T void VD(mm_##NAME)(const uint8_t *w, int64_t rb, const vd_act *a, float *y, int64_t ldy,  \
	                               int64_t r0, int64_t r1) {                                              \
		const int64_t nb = a->cols / 256;                                                                \
		for (int64_t r = r0; r < r1; r++) {                                                              \
			const uint8_t *row = w + r * rb;                                                             \
			for (int64_t i = 0; i < a->n; i++) {                                                         \
				const int8_t *aq = a->q + i * a->cols;                                                   \
				const float *ad = a->d + i * nb;                                                         \
				const int16_t *bs = a->s + i * nb * 16;                                                  \
				__m256 acc = _mm256_setzero_ps();                                                        \
				float corr = 0;                                                                          \
				for (int64_t b = 0; b < nb; b++) {                                                       \
					VD(prefetch_ahead)(row + b * BB, BB);                                                \
					VD(b_##NAME)(row + b * BB, aq + b * 256, ad[b], bs + b * 16, &acc, &corr);           \
				}                                                                                        \
				y[i * ldy + r] = VD(hsum)(acc) + corr;                                                   \
			}                                                                                            \
		}                                                                                                \
	}

#define VD_ROWS256X4(NAME, BB)                                                                           \
	static VD_T void VD(mmx_##NAME)(const uint8_t *w, int64_t rb, const vd_act *a, float *y, int64_t ldy, \
	                                int64_t r0, int64_t r1) {                                             \
		const int64_t nb = a->cols / 256;                                                                \
		for (int64_t r = r0; r < r1; r++) {                                                              \
			const uint8_t *row = w + r * rb;                                                             \
			for (int64_t i0 = 0; i0 < a->n; i0 += 4) {                                                   \
				const int na = a->n - i0 < 4 ? (int)(a->n - i0) : 4;                                    \
				__m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),         \
				                 _mm256_setzero_ps()};                                                    \
				for (int64_t b = 0; b < nb; b++) {                                                       \
					const int8_t *aq[4];                                                                 \
					const int16_t *bs[4];                                                                \
					float ad[4];                                                                         \
					for (int k = 0; k < na; k++) {                                                       \
						aq[k] = a->q + (i0 + k) * a->cols + b * 256;                                     \
						ad[k] = a->d[(i0 + k) * nb + b];                                                 \
						bs[k] = a->s + ((i0 + k) * nb + b) * 16;                                         \
					}                                                                                    \
					VD(m_##NAME)(row + b * BB, na, aq, ad, bs, acc);                                     \
				}                                                                                        \
				for (int k = 0; k < na; k++) y[(i0 + k) * ldy + r] = VD(hsum)(acc[k]);                   \
			}                                                                                            \
		}                                                                                                \
	}

// VD_ROWS32X4: SIGNED types carry their signs in sg; the others (Q4_1, Q5_1) add m * sum(a).
#define VD_ROWS32X4(NAME, BB, SIGNED)                                                                    \
	static VD_T void VD(mmx_##NAME)(const uint8_t *w, int64_t rb, const vd_act *a, float *y, int64_t ldy, \
	                                int64_t r0, int64_t r1) {                                             \
		const int64_t nb = a->cols / 32;                                                                 \
		for (int64_t r = r0; r < r1; r++) {                                                              \
			const uint8_t *row = w + r * rb;                                                             \
			for (int64_t i0 = 0; i0 < a->n; i0 += 4) {                                                   \
				const int na = a->n - i0 < 4 ? (int)(a->n - i0) : 4;                                    \
				__m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),         \
				                 _mm256_setzero_ps()};                                                    \
				float corr[4] = {0, 0, 0, 0};                                                            \
				for (int64_t b = 0; b < nb; b++) {                                                       \
					const vd_dec32 dw = VD(d_##NAME)(row + b * BB);                                      \
					for (int k = 0; k < na; k++) {                                                       \
						const int64_t ib = (i0 + k) * nb + b;                                            \
						__m256i av = VD(load)(a->q + (i0 + k) * a->cols + b * 32);                       \
						if (SIGNED) av = _mm256_sign_epi8(av, dw.sg);                                    \
						const float s = dw.d * a->d[ib];                                                 \
						acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(s), _mm256_cvtepi32_ps(VD(dot_us)(dw.u, av)), acc[k]); \
						if (!SIGNED) corr[k] += dw.m * a->d[ib] * (float)a->s[ib];                       \
					}                                                                                    \
				}                                                                                        \
				for (int k = 0; k < na; k++) y[(i0 + k) * ldy + r] = VD(hsum)(acc[k]) + corr[k];          \
			}                                                                                            \
		}                                                                                                \
	}

// ---- the signed 32-value types (Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4) in tiles of two weight
// rows x up to four activation rows (n > 1): each weight row is decoded once per call into
// vd_p32 blocks, each activation chunk loaded once for both rows, and a pair's block costs
// one int8 dot, one conversion, one multiply of broadcast scales and one fmadd (the batch
// kernel above also paid a sign per pair and a scalar product and broadcast per block and
// pair). With VNNI the activations go in as unsigned bytes, a + 128, against the signed
// weights, and c starts each sum at -128 x the weights' sums: exact, without a sign per
// pair. Every pair's sum and float steps are VD_ROWS32X4's, so the bits are too.
// BenchmarkMoETypes (gpt-oss-like layer, 64 tokens, 2-core VM, medians of 5): MXFP4 126 ->
// 182, Q8_0 132 -> 168 GFLOP/s. ----

// p32_prep decodes rows r..r+R-1 (nb blocks each) into p and their scales into pd.
#define VD_P32_PREP(NAME, BB)                                                                            \
	static VD_T void VD(p32_prep_##NAME)(int R, const uint8_t *w, int64_t rb, int64_t nb, int64_t r,    \
	                                     vd_p32 *p, float *pd) {                                         \
		for (int rr = 0; rr < R; rr++) {                                                                 \
			for (int64_t b = 0; b < nb; b++) {                                                           \
				const uint8_t *blk = w + (r + rr) * rb + b * BB;                                         \
				if ((b & 1) == 0) _mm_prefetch((const char *)blk + VD_PREFETCH, _MM_HINT_T0);           \
				const vd_dec32 dw = VD(d_##NAME)(blk);                                                   \
				_mm256_storeu_si256((__m256i *)p[rr * nb + b].w, dw.sg);                                 \
				_mm256_storeu_si256((__m256i *)p[rr * nb + b].c, VD(p32_c)(dw));                         \
				pd[rr * nb + b] = dw.d;                                                                  \
			}                                                                                            \
		}                                                                                                \
	}

static inline VD_T VD_AI __m256i VD(p32_c)(vd_dec32 dw) {
#ifdef VD_VNNI
	return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), dw.sg));
#else
	return dw.u;
#endif
}

// p32_tile: pf (may be NULL) is the next two weight rows, 2 x bb bytes a block, asked for
// here so memory works while the tile computes: without, p32_prep stalled on its loads
// and took a quarter of the kernel's time (perf), and MoETypes n=64 ran ~15% slower.
static inline VD_T VD_AI void VD(p32_tile)(const int R, const int T, const vd_p32 *p, const float *pd, const vd_act *a,
                                           int64_t r, int64_t i0, float *y, int64_t ldy, const uint8_t *pf, int64_t bb) {
	const int64_t nb = a->cols / 32;
	__m256 acc[2][4];
	VD_UNROLL
	for (int rr = 0; rr < R; rr++)
		VD_UNROLL
		for (int t = 0; t < T; t++) acc[rr][t] = _mm256_setzero_ps();
	// Row pointers hoisted: gcc otherwise recomputed (i0 + t) * cols, from memory, per block.
	const int8_t *aq[4];
	const float *ad[4];
	VD_UNROLL
	for (int t = 0; t < T; t++) {
		aq[t] = a->q + (i0 + t) * a->cols;
		ad[t] = a->d + (i0 + t) * nb;
	}
	const vd_p32 *pr[2];
	const float *pdr[2];
	VD_UNROLL
	for (int rr = 0; rr < R; rr++) {
		pr[rr] = p + rr * nb;
		pdr[rr] = pd + rr * nb;
	}
	for (int64_t b = 0; b < nb; b++) {
		if (pf) {
			_mm_prefetch((const char *)pf + 2 * bb * b, _MM_HINT_T0);
			_mm_prefetch((const char *)pf + 2 * bb * b + bb, _MM_HINT_T0);
		}
		__m256i wv[2], cv[2];
		__m256 wd[2];
		VD_UNROLL
		for (int rr = 0; rr < R; rr++) {
			wv[rr] = VD(load)(pr[rr][b].w);
			cv[rr] = VD(load)(pr[rr][b].c);
			wd[rr] = _mm256_broadcast_ss(pdr[rr] + b);
		}
		VD_UNROLL
		for (int t = 0; t < T; t++) {
			__m256i av = VD(load)(aq[t] + b * 32);
			const __m256 adv = _mm256_broadcast_ss(ad[t] + b);
#ifdef VD_VNNI
			av = _mm256_xor_si256(av, _mm256_set1_epi8((char)0x80));
#endif
			VD_UNROLL
			for (int rr = 0; rr < R; rr++) {
#ifdef VD_VNNI
				const __m256i dot = _mm256_dpbusd_epi32(cv[rr], av, wv[rr]);
#else
				const __m256i dot = VD(dot_us)(cv[rr], _mm256_sign_epi8(av, wv[rr]));
#endif
				acc[rr][t] = _mm256_fmadd_ps(_mm256_mul_ps(wd[rr], adv), _mm256_cvtepi32_ps(dot), acc[rr][t]);
			}
		}
	}
	VD_UNROLL
	for (int rr = 0; rr < R; rr++)
		VD_UNROLL
		for (int t = 0; t < T; t++) y[(i0 + t) * ldy + r + rr] = VD(hsum)(acc[rr][t]);
}

static inline VD_T VD_AI void VD(p32_rows)(const int R, const vd_p32 *p, const float *pd, const vd_act *a, int64_t r,
                                           float *y, int64_t ldy, const uint8_t *pf, int64_t bb) {
	int64_t i = 0;
	for (; i + 4 <= a->n; i += 4, pf = NULL) VD(p32_tile)(R, 4, p, pd, a, r, i, y, ldy, pf, bb);
	switch (a->n - i) {
	case 3: VD(p32_tile)(R, 3, p, pd, a, r, i, y, ldy, pf, bb); break;
	case 2: VD(p32_tile)(R, 2, p, pd, a, r, i, y, ldy, pf, bb); break;
	case 1: VD(p32_tile)(R, 1, p, pd, a, r, i, y, ldy, pf, bb); break;
	}
}

static VD_T void VD(p32_rows2)(const vd_p32 *p, const float *pd, const vd_act *a, int64_t r, float *y, int64_t ldy,
                               const uint8_t *pf, int64_t bb) {
	VD(p32_rows)(2, p, pd, a, r, y, ldy, pf, bb);
}

static VD_T void VD(p32_rows1)(const vd_p32 *p, const float *pd, const vd_act *a, int64_t r, float *y, int64_t ldy) {
	VD(p32_rows)(1, p, pd, a, r, y, ldy, NULL, 0);
}

// VD_ROWS32T: mmt_NAME, the tiles; without memory for the decoded rows, VD_ROWS32X4's kernel.
#define VD_ROWS32T(NAME, BB)                                                                             \
	VD_P32_PREP(NAME, BB)                                                                                \
	static VD_T void VD(mmt_##NAME)(const uint8_t *w, int64_t rb, const vd_act *a, float *y, int64_t ldy, \
	                                int64_t r0, int64_t r1) {                                             \
		const int64_t nb = a->cols / 32;                                                                 \
		vd_p32 *p = _mm_malloc(sizeof(vd_p32) * (size_t)(2 * nb), 64);                                  \
		float *pd = malloc(sizeof(float) * (size_t)(2 * nb));                                            \
		if (!p || !pd) {                                                                                 \
			_mm_free(p);                                                                                 \
			free(pd);                                                                                    \
			VD(mmx_##NAME)(w, rb, a, y, ldy, r0, r1);                                                    \
			return;                                                                                      \
		}                                                                                                \
		int64_t r = r0;                                                                                  \
		for (; r + 2 <= r1; r += 2) {                                                                    \
			VD(p32_prep_##NAME)(2, w, rb, nb, r, p, pd);                                                 \
			VD(p32_rows2)(p, pd, a, r, y, ldy, r + 4 <= r1 ? w + (r + 2) * rb : NULL, BB);               \
		}                                                                                                \
		if (r < r1) {                                                                                    \
			VD(p32_prep_##NAME)(1, w, rb, nb, r, p, pd);                                                 \
			VD(p32_rows1)(p, pd, a, r, y, ldy);                                                          \
		}                                                                                                \
		_mm_free(p);                                                                                     \
		free(pd);                                                                                        \
	}

VD_ROWS32(q4_0, 18)
VD_ROWS32(q4_1, 20)
VD_ROWS32(q5_0, 22)
VD_ROWS32(q5_1, 24)
VD_ROWS32(q8_0, 34)
VD_ROWS32(iq4_nl, 18)
VD_ROWS32(mxfp4, 17)
VD_ROWS32X4(q4_0, 18, 1)
VD_ROWS32X4(q4_1, 20, 0)
VD_ROWS32X4(q5_0, 22, 1)
VD_ROWS32X4(q5_1, 24, 0)
VD_ROWS32X4(q8_0, 34, 1)
VD_ROWS32X4(iq4_nl, 18, 1)
VD_ROWS32X4(mxfp4, 17, 1)
VD_ROWS32T(q4_0, 18)
VD_ROWS32T(q5_0, 22)
VD_ROWS32T(q8_0, 34)
VD_ROWS32T(iq4_nl, 18)
VD_ROWS32T(mxfp4, 17)
VD_ROWS256(q2_k, 84)
VD_ROWS256(q3_k, 110)
VD_ROWS256(q5_k, 176)
VD_ROWS256(q6_k, 210)

VD_ROWS256(iq4_xs, 136)
VD_ROWS256(iq2_xxs, 66)
VD_ROWS256(iq2_xs, 74)
VD_ROWS256(iq2_s, 82)
VD_ROWS256(iq3_xxs, 98)
VD_ROWS256(iq3_s, 110)
VD_ROWS256X4(q5_k, 176)

// ---- Q5_K and Q6_K in tiles of two weight rows x up to four activation rows (n >= 4):
// each 32-value chunk is unpacked once for all the tile's activation rows, each activation
// chunk loaded once for both weight rows, the eight sums kept in registers; the scales are
// decoded once per weight row per call (vd_k_pre). Each (row, activation) pair gets the
// one-row kernel's integer sum (b_q45_k, b_q6_k: exact in any order) and its float steps, so
// the bits match it. TYPE is a constant at every call. ----

// vd_k_pre: one block of a weight row, its scales ready for the tile: Q6_K's two scales per
// chunk in int16 lanes (low and high 128-bit lane) and its sixteen scales (for its -32
// offset); Q5_K's eight scales, which the tile broadcasts as Q4_K's does (vd_q4k_pre; 4-8
// rows ~10% faster than with vectors), and its eight mins; d and dmin.
typedef struct {
	int16_t scv[8][16]; // Q6_K
	int16_t sc[16];     // Q6_K: 16; Q5_K: 8
	int32_t m[8];       // Q5_K
	float d, dmin;
} VD(k_pre);

static inline VD_T VD_AI void VD(k_prep)(const int TYPE, int R, const uint8_t *w, int64_t rb, int64_t nb, int64_t r,
                                         VD(k_pre) *pre) {
	const int bb = TYPE == VD_Q6_K ? 210 : 176;
	for (int rr = 0; rr < R; rr++) {
		for (int64_t b = 0; b < nb; b++) {
			const uint8_t *blk = w + (r + rr) * rb + b * bb;
			VD(prefetch_ahead)(blk, bb); // the first touch of these rows: stream them from here
			VD(k_pre) *o = &pre[rr * nb + b];
			if (TYPE == VD_Q6_K) {
				const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
				_mm256_storeu_si256((__m256i *)o->sc, sc16);
				for (int h = 0; h < 2; h++) {
					const __m256i s = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00) : _mm256_permute2x128_si256(sc16, sc16, 0x11);
					for (int j = 0; j < 4; j++) _mm256_storeu_si256((__m256i *)o->scv[4 * h + j], VD(shuf16)(s, 2 * j, 2 * j + 1));
				}
				o->d = VD(f16)(blk + 208);
			} else {
				__m128i sc, mn;
				VD(q4k_sm)(blk, &sc, &mn); // Q5_K keeps Q4_K's d, dmin and packed scales
				_mm_storeu_si128((__m128i *)o->sc, sc);
				_mm256_storeu_si256((__m256i *)o->m, _mm256_cvtepi16_epi32(mn));
				o->d = VD(f16)(blk);
				o->dmin = VD(f16)(blk + 2);
			}
		}
	}
}

// k_codes: chunk c of a block as unsigned codes (Q6_K 0..63 as b_q6_k's u0..u3 of half c/4;
// Q5_K 0..31, the fifth bit being bit c of each qh byte).
static inline VD_T VD_AI __m256i VD(k_codes)(const int TYPE, const uint8_t *blk, const int c) {
	const __m256i m4 = _mm256_set1_epi8(15);
	if (TYPE == VD_Q6_K) {
		const int h = c / 4, j = c % 4;
		const __m256i l = VD(load)(blk + 64 * h + 32 * (j & 1)), hv = VD(load)(blk + 128 + 32 * h);
		const __m256i lo = j < 2 ? _mm256_and_si256(l, m4) : _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
		const __m256i hi = j == 0 ? _mm256_slli_epi16(hv, 4) : j == 1 ? _mm256_slli_epi16(hv, 2) : j == 2 ? hv : _mm256_srli_epi16(hv, 2);
		return _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
	}
	const __m256i q = VD(load)(blk + 48 + 32 * (c / 2)), hb = VD(load)(blk + 16);
	const __m256i lo = _mm256_and_si256(c & 1 ? _mm256_srli_epi16(q, 4) : q, m4);
	// Bit c of each qh byte to bit 4 (16-bit shifts move it within its byte).
	const __m256i hi = c <= 4 ? _mm256_slli_epi16(hb, 4 - c) : _mm256_srli_epi16(hb, c - 4);
	return _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi8(16)));
}

static inline VD_T VD_AI void VD(k_tile)(const int TYPE, const int R, const int T, const uint8_t *w, int64_t rb,
                                         const vd_act *a, int64_t r, int64_t i0, float *y, int64_t ldy,
                                         const VD(k_pre) *pre) {
	const int bb = TYPE == VD_Q6_K ? 210 : 176;
	const int64_t nb = a->cols / 256;
	__m256 acc[2][4];
	VD_UNROLL
	for (int rr = 0; rr < R; rr++)
		VD_UNROLL
		for (int t = 0; t < T; t++) acc[rr][t] = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *blk[2];
		VD_UNROLL
		for (int rr = 0; rr < R; rr++) {
			blk[rr] = w + (r + rr) * rb + b * bb;
			VD(prefetch_ahead)(blk[rr], bb);
		}
		__m256i isum[2][4];
		VD_UNROLL
		for (int rr = 0; rr < R; rr++)
			VD_UNROLL
			for (int t = 0; t < T; t++) isum[rr][t] = _mm256_setzero_si256();
		VD_UNROLL
		for (int c = 0; c < 8; c++) {
			__m256i u[2], s[2];
			VD_UNROLL
			for (int rr = 0; rr < R; rr++) {
				u[rr] = VD(k_codes)(TYPE, blk[rr], c);
				s[rr] = TYPE == VD_Q6_K ? VD(load)(pre[rr * nb + b].scv[c]) : _mm256_set1_epi16(pre[rr * nb + b].sc[c]);
			}
			VD_UNROLL
			for (int t = 0; t < T; t++) {
				const __m256i av = VD(load)(a->q + (i0 + t) * a->cols + b * 256 + 32 * c);
				VD_UNROLL
				for (int rr = 0; rr < R; rr++) isum[rr][t] = _mm256_add_epi32(isum[rr][t], VD(dot_us16)(u[rr], av, s[rr]));
			}
		}
		VD_UNROLL
		for (int rr = 0; rr < R; rr++) {
			const VD(k_pre) *pb = &pre[rr * nb + b];
			VD_UNROLL
			for (int t = 0; t < T; t++) {
				const int64_t ib = (i0 + t) * nb + b;
				const float ad = a->d[ib];
				if (TYPE == VD_Q6_K) {
					// The -32 offset, exactly as b_q6_k (it starts its sum there).
					const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(VD(load)(pb->sc), VD(load)(a->s + ib * 16)), 5);
					acc[rr][t] = _mm256_fmadd_ps(_mm256_set1_ps(pb->d * ad), _mm256_cvtepi32_ps(_mm256_sub_epi32(isum[rr][t], off)), acc[rr][t]);
				} else {
					// b_q45_k's steps: the mins times the activation sums of their 32 values.
					const __m256i bsp = _mm256_madd_epi16(VD(load)(a->s + ib * 16), _mm256_set1_epi16(1));
					const __m256 mins = _mm256_cvtepi32_ps(_mm256_mullo_epi32(VD(load)(pb->m), bsp));
					acc[rr][t] = _mm256_fmadd_ps(_mm256_set1_ps(pb->d * ad), _mm256_cvtepi32_ps(isum[rr][t]), acc[rr][t]);
					acc[rr][t] = _mm256_fnmadd_ps(_mm256_set1_ps(pb->dmin * ad), mins, acc[rr][t]);
				}
			}
		}
	}
	VD_UNROLL
	for (int rr = 0; rr < R; rr++)
		VD_UNROLL
		for (int t = 0; t < T; t++) y[(i0 + t) * ldy + r + rr] = VD(hsum)(acc[rr][t]);
}

static inline VD_T VD_AI void VD(k_rows)(const int TYPE, const int R, const uint8_t *w, int64_t rb, const vd_act *a,
                                         int64_t r, float *y, int64_t ldy, const VD(k_pre) *pre) {
	int64_t i = 0;
	for (; i + 4 <= a->n; i += 4) VD(k_tile)(TYPE, R, 4, w, rb, a, r, i, y, ldy, pre);
	switch (a->n - i) {
	case 3: VD(k_tile)(TYPE, R, 3, w, rb, a, r, i, y, ldy, pre); break;
	case 2: VD(k_tile)(TYPE, R, 2, w, rb, a, r, i, y, ldy, pre); break;
	case 1: VD(k_tile)(TYPE, R, 1, w, rb, a, r, i, y, ldy, pre); break;
	}
}

// k_tiles runs rows [r0, r1) in tiles; it reports false (nothing done) below four activation
// rows, where the scale decode did not pay (Q6_K 768x2048, one Zen 3 thread: n=2 29 against
// 25 GMAC/s), or without memory for the decoded scales.
static inline VD_T VD_AI int VD(k_tiles)(const int TYPE, const uint8_t *w, int64_t rb, const vd_act *a, float *y,
                                         int64_t ldy, int64_t r0, int64_t r1) {
	const int64_t nb = a->cols / 256;
	VD(k_pre) *pre = a->n >= 4 ? malloc(sizeof(VD(k_pre)) * (size_t)(2 * nb)) : NULL;
	if (!pre) return 0;
	int64_t r = r0;
	for (; r + 2 <= r1; r += 2) {
		VD(k_prep)(TYPE, 2, w, rb, nb, r, pre);
		VD(k_rows)(TYPE, 2, w, rb, a, r, y, ldy, pre);
	}
	if (r < r1) {
		VD(k_prep)(TYPE, 1, w, rb, nb, r, pre);
		VD(k_rows)(TYPE, 1, w, rb, a, r, y, ldy, pre);
	}
	free(pre);
	return 1;
}

// mmt_q5_k, mmt_q6_k: tiles from four activation rows up (768x2048, one Zen 3 thread: Q5_K
// n=8 21-30 -> 44, Q6_K n=8 26 -> 43, n=64 27 -> 44 GMAC/s), else the row kernels.
static VD_T void VD(mmt_q5_k)(const uint8_t *w, int64_t rb, const vd_act *a, float *y, int64_t ldy, int64_t r0, int64_t r1) {
	if (!VD(k_tiles)(VD_Q5_K, w, rb, a, y, ldy, r0, r1)) (a->n > 1 ? VD(mmx_q5_k) : VD(mm_q5_k))(w, rb, a, y, ldy, r0, r1);
}

static VD_T void VD(mmt_q6_k)(const uint8_t *w, int64_t rb, const vd_act *a, float *y, int64_t ldy, int64_t r0, int64_t r1) {
	if (!VD(k_tiles)(VD_Q6_K, w, rb, a, y, ldy, r0, r1)) VD(mm_q6_k)(w, rb, a, y, ldy, r0, r1);
}

// ---- The IQ types, Q2_K and Q3_K in tiles of two weight rows x up to four activation rows
// (n > 1). Their row kernels spend most of a block on decoding it (IQ3_XXS: 64 table
// loads and the vectors built from them, for 256 values), and did it again for every
// activation row: n = 8 cost 8x n = 1. Here each weight block is decoded once per call into
// vd_i256 (its values as bytes, its scales as int16), and the tile dots those with T
// activation rows, each activation chunk loaded once for both weight rows. A pair's
// integer sum per block is the row kernel's, lane for lane (sign, maddubs, madd with the
// scales; exact in any order), and its float steps are the row kernel's, so the bits match
// it and do not depend on how the pool splits the rows. The decoded blocks live in a
// bounded stack buffer (VD_I256_CH blocks of two rows); wider rows go through it a chunk of
// blocks at a time, for up to VD_I256_G activation rows at once, with the tiles'
// accumulators kept between chunks in another (exact: the same operations in the same
// order). TYPE is a constant at every call.
// IQ3_XXS 1024x4096, one thread of the 2-core VM (Zen 5 class, VNNI), us per activation row:
// n=1 (row kernel) ~400, n=2 ~340, n=8 ~125, n=64 ~62; at n=8 the decode takes about 55% of
// the time (perf), at n=64 the tile runs about as fast per value as Q4_K's (~66). Tried and
// left out, as no faster within this VM's noise: the grid and sign tables read with AVX2
// gathers in the decode (n=8 122-130 against 119); the decode as scalar stores of the grid
// entries and the signs put on afterwards in vectors (n=8 122 against 120, n=2 306 against
// 325); tiles of six or eight activation rows (n=64 61, 59 against 61); with VNNI, each
// chunk's dot by vpdpbusd (a + 128 against the signed values, no vpsignb) and two chunks'
// dots packed into int16 pairs for one vpdpwssd with their scales, 1.5 multiplies a chunk
// and pair against 2 (n=64 63 against 62). ----

#ifndef VD_I256_CH
#define VD_I256_CH 16 // blocks of each weight row decoded at once: 4096 values
#endif
#ifndef VD_I256_G
#define VD_I256_G 64 // activation rows sharing one decode of a row's chunk when it has several
#endif

// i256_bb: the block size in bytes of TYPE.
static inline VD_T VD_AI int VD(i256_bb)(const int TYPE) {
	switch (TYPE) {
	case VD_IQ2_XXS: return 66;
	case VD_IQ2_XS: return 74;
	case VD_IQ2_S: return 82;
	case VD_IQ3_XXS: return 98;
	case VD_IQ3_S: return 110;
	case VD_IQ4_XS: return 136;
	case VD_Q2_K: return 84;
	}
	return 110; // Q3_K
}

// i256_dec decodes block b of type TYPE into o, as the type's row kernel (b_NAME) does.
static inline VD_T VD_AI void VD(i256_dec)(const int TYPE, const uint8_t *b, vd_i256 *o) {
	if (TYPE == VD_Q2_K || TYPE == VD_Q3_K) {
		const uint8_t *qs = b + (TYPE == VD_Q2_K ? 16 : 32);
		const __m256i hm = TYPE == VD_Q3_K ? VD(load)(b) : _mm256_setzero_si256();
		for (int h = 0; h < 2; h++) {
			const __m256i q = VD(load)(qs + 32 * h);
			for (int j = 0; j < 4; j++) {
				__m256i u = VD(two_bits)(q, 2 * j);
				if (TYPE == VD_Q3_K) u = _mm256_or_si256(u, VD(mask_bit)(hm, 1 << (4 * h + j), 4));
				_mm256_storeu_si256((__m256i *)(o->w + 128 * h + 32 * j), u);
			}
		}
		if (TYPE == VD_Q2_K) {
			const __m128i sv = _mm_loadu_si128((const __m128i *)b), m4 = _mm_set1_epi8(15);
			_mm256_storeu_si256((__m256i *)o->sc, _mm256_cvtepu8_epi16(_mm_and_si128(sv, m4)));
			_mm256_storeu_si256((__m256i *)o->m, _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sv, 4), m4)));
			o->d = VD(f16)(b + 80);
			o->dmin = VD(f16)(b + 82);
		} else {
			uint32_t w[3];
			memcpy(w, b + 96, 12);
			const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
			const __m128i s8 = _mm_setr_epi32((int)((w[0] & m4) | (w[2] & m2) << 4), (int)((w[1] & m4) | ((w[2] >> 2) & m2) << 4),
			                                  (int)(((w[0] >> 4) & m4) | ((w[2] >> 4) & m2) << 4),
			                                  (int)(((w[1] >> 4) & m4) | ((w[2] >> 6) & m2) << 4));
			_mm256_storeu_si256((__m256i *)o->sc, _mm256_sub_epi16(_mm256_cvtepu8_epi16(s8), _mm256_set1_epi16(32)));
			o->d = VD(f16)(b + 108);
		}
		return;
	}
	for (int ib = 0; ib < 8; ib++) {
		__m256i g, sg = _mm256_setzero_si256(); // IQ4_XS: its values come signed
		int s0 = 0, s1 = 0;
		if (TYPE == VD_IQ4_XS) {
			uint16_t sh;
			memcpy(&sh, b + 2, 2);
			g = _mm256_shuffle_epi8(VD(lut16)(vd_kv_iq4nl), VD(nib32)(b + 8 + 16 * ib));
			s0 = s1 = (((b[4 + ib / 2] >> (4 * (ib & 1))) & 15) | (((sh >> (2 * ib)) & 3) << 4)) - 32;
		} else {
			VD(iq_unpack32)(TYPE, b, ib, &g, &sg, &s0, &s1);
		}
		_mm256_storeu_si256((__m256i *)(o->w + 32 * ib), TYPE == VD_IQ4_XS ? g : _mm256_sign_epi8(g, sg));
		o->sc[2 * ib] = (int16_t)s0;
		o->sc[2 * ib + 1] = (int16_t)s1;
	}
	o->d = VD(f16)(b);
}

// i256_prep decodes blocks b0..b0+nc-1 of weight rows r..r+R-1 into p (VD_I256_CH a row).
static inline VD_T VD_AI void VD(i256_prep)(const int TYPE, const int R, const uint8_t *w, int64_t rb, int64_t r,
                                            int64_t b0, int64_t nc, vd_i256 *p) {
	const int bb = VD(i256_bb)(TYPE);
	for (int rr = 0; rr < R; rr++) {
		for (int64_t b = 0; b < nc; b++) {
			const uint8_t *blk = w + (r + rr) * rb + (b0 + b) * bb;
			VD(prefetch_ahead)(blk, bb); // the first touch of these rows: stream them from here
			VD(i256_dec)(TYPE, blk, &p[rr * VD_I256_CH + b]);
		}
	}
}

// i256_tile: weight rows r..r+R-1 (decoded blocks b0..b0+nc-1 in p) against activation rows
// i0..i0+T-1. first: the accumulators start at zero, else from accs; last: their sums go to
// y, else back to accs (T x R x 8 floats).
static inline VD_T VD_AI void VD(i256_tile)(const int TYPE, const int R, const int T, const vd_i256 *p, int64_t nc,
                                            int64_t b0, const vd_act *a, int64_t r, int64_t i0, float *y, int64_t ldy,
                                            float *accs, int first, int last) {
	const int64_t nb = a->cols / 256;
	const int sgn = TYPE != VD_Q2_K && TYPE != VD_Q3_K;
	const __m256i ctrl = VD(load)(vd_shuf16_ctrl[0][1]); // sc[2c] over the low lane, sc[2c+1] over the high
	__m256 acc[2][4];
	VD_UNROLL
	for (int rr = 0; rr < R; rr++)
		VD_UNROLL
		for (int t = 0; t < T; t++) acc[rr][t] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(accs + (2 * t + rr) * 8);
	const int8_t *aq[4];
	const float *ad[4];
	const int16_t *bs[4];
	VD_UNROLL
	for (int t = 0; t < T; t++) {
		aq[t] = a->q + (i0 + t) * a->cols + b0 * 256;
		ad[t] = a->d + (i0 + t) * nb + b0;
		bs[t] = a->s + ((i0 + t) * nb + b0) * 16;
	}
	for (int64_t b = 0; b < nc; b++) {
		const vd_i256 *pb[2];
		VD_UNROLL
		for (int rr = 0; rr < R; rr++) pb[rr] = p + rr * VD_I256_CH + b;
		__m256i isum[2][4];
		VD_UNROLL
		for (int rr = 0; rr < R; rr++)
			VD_UNROLL
			for (int t = 0; t < T; t++) isum[rr][t] = _mm256_setzero_si256();
		VD_UNROLL
		for (int c = 0; c < 8; c++) {
			__m256i wv[2], u[2], s[2];
			VD_UNROLL
			for (int rr = 0; rr < R; rr++) {
				wv[rr] = VD(load)(pb[rr]->w + 32 * c);
				u[rr] = sgn ? _mm256_abs_epi8(wv[rr]) : wv[rr];
				uint32_t s2;
				memcpy(&s2, &pb[rr]->sc[2 * c], 4);
				s[rr] = _mm256_shuffle_epi8(_mm256_set1_epi32((int)s2), ctrl);
			}
			VD_UNROLL
			for (int t = 0; t < T; t++) {
				__m256i av = VD(load)(aq[t] + 256 * b + 32 * c);
				VD_PIN(av);
				VD_UNROLL
				for (int rr = 0; rr < R; rr++) {
					const __m256i prod = _mm256_maddubs_epi16(u[rr], sgn ? _mm256_sign_epi8(av, wv[rr]) : av);
#ifdef VD_VNNI
					isum[rr][t] = _mm256_dpwssd_epi32(isum[rr][t], prod, s[rr]);
#else
					isum[rr][t] = _mm256_add_epi32(isum[rr][t], _mm256_madd_epi16(prod, s[rr]));
#endif
					VD_PIN(isum[rr][t]);
				}
			}
		}
		VD_UNROLL
		for (int rr = 0; rr < R; rr++) {
			VD_UNROLL
			for (int t = 0; t < T; t++) {
				const float adb = ad[t][b];
				const int16_t *bsb = bs[t] + 16 * b;
				__m256i is = isum[rr][t];
				if (TYPE == VD_Q3_K) // b_q3_k's -4 offset
					is = _mm256_sub_epi32(is, _mm256_slli_epi32(_mm256_madd_epi16(VD(load)(pb[rr]->sc), VD(load)(bsb)), 2));
				const float f = pb[rr]->d * adb * VD(iq_scale)(TYPE);
				acc[rr][t] = _mm256_fmadd_ps(_mm256_set1_ps(f), _mm256_cvtepi32_ps(is), acc[rr][t]);
				if (TYPE == VD_Q2_K) {
					const __m256 mins = _mm256_cvtepi32_ps(_mm256_madd_epi16(VD(load)(pb[rr]->m), VD(load)(bsb)));
					acc[rr][t] = _mm256_fnmadd_ps(_mm256_set1_ps(pb[rr]->dmin * adb), mins, acc[rr][t]);
				}
			}
		}
	}
	VD_UNROLL
	for (int rr = 0; rr < R; rr++)
		VD_UNROLL
		for (int t = 0; t < T; t++) {
			if (last)
				y[(i0 + t) * ldy + r + rr] = VD(hsum)(acc[rr][t]);
			else
				_mm256_storeu_ps(accs + (2 * t + rr) * 8, acc[rr][t]);
		}
}

// i256_mm: weight rows r..r+R-1 against every activation row; p has room for VD_I256_CH
// blocks of two rows, accs for VD_I256_G x 2 accumulators.
static inline VD_T VD_AI void VD(i256_mm)(const int TYPE, const int R, const uint8_t *w, int64_t rb, const vd_act *a,
                                          int64_t r, float *y, int64_t ldy, vd_i256 *p, float *accs) {
	const int64_t nb = a->cols / 256;
	for (int64_t i0 = 0; i0 < a->n; i0 += VD_I256_G) {
		const int64_t ni = a->n - i0 < VD_I256_G ? a->n - i0 : VD_I256_G;
		for (int64_t b0 = 0; b0 < nb; b0 += VD_I256_CH) {
			const int64_t nc = nb - b0 < VD_I256_CH ? nb - b0 : VD_I256_CH;
			const int first = b0 == 0, last = b0 + nc == nb;
			if (i0 == 0 || nb > VD_I256_CH) VD(i256_prep)(TYPE, R, w, rb, r, b0, nc, p); // else still there
			int64_t i = 0;
			for (; i + 4 <= ni; i += 4) VD(i256_tile)(TYPE, R, 4, p, nc, b0, a, r, i0 + i, y, ldy, accs + 16 * i, first, last);
			switch (ni - i) {
			case 3: VD(i256_tile)(TYPE, R, 3, p, nc, b0, a, r, i0 + i, y, ldy, accs + 16 * i, first, last); break;
			case 2: VD(i256_tile)(TYPE, R, 2, p, nc, b0, a, r, i0 + i, y, ldy, accs + 16 * i, first, last); break;
			case 1: VD(i256_tile)(TYPE, R, 1, p, nc, b0, a, r, i0 + i, y, ldy, accs + 16 * i, first, last); break;
			}
		}
	}
}

// VD_I256T: mmt_NAME, the tiles; run takes them from VD_I256_MIN activation rows up. From
// two, every type but IQ2_XXS gained (1024x4096, us per activation row, n=2 against n=1,
// IQ3_XXS 340-370 against 400-430, IQ2_XS 227 against 303, IQ2_S 204 against 397, IQ3_S 399
// against 528, IQ4_XS 110 against 198, Q2_K 81 against 95, Q3_K 105 against 145); IQ2_XXS
// even there (256 against 249), ahead from three (179 against 246).
#ifndef VD_I256_MIN
#define VD_I256_MIN 2
#endif
#define VD_I256T(NAME, TYPE)                                                                             \
	static VD_T void VD(i256_2_##NAME)(const uint8_t *w, int64_t rb, const vd_act *a, int64_t r, float *y, \
	                                   int64_t ldy, vd_i256 *p, float *accs) {                           \
		VD(i256_mm)(TYPE, 2, w, rb, a, r, y, ldy, p, accs);                                              \
	}                                                                                                    \
	static VD_T void VD(i256_1_##NAME)(const uint8_t *w, int64_t rb, const vd_act *a, int64_t r, float *y, \
	                                   int64_t ldy, vd_i256 *p, float *accs) {                           \
		VD(i256_mm)(TYPE, 1, w, rb, a, r, y, ldy, p, accs);                                              \
	}                                                                                                    \
	static VD_T void VD(mmt_##NAME)(const uint8_t *w, int64_t rb, const vd_act *a, float *y, int64_t ldy, \
	                                int64_t r0, int64_t r1) {                                             \
		/* 15.5 KB of stack; aligned by hand (see vd_i256), as gcc does not realign the */              \
		/* Win64 stack (cpu_amd64.go). */                                                                \
		uint8_t buf[sizeof(vd_i256) * 2 * VD_I256_CH + 32];                                              \
		vd_i256 *p = (vd_i256 *)(((uintptr_t)buf + 31) & ~(uintptr_t)31);                                \
		float accs[VD_I256_G * 2 * 8];                                                                   \
		int64_t r = r0;                                                                                  \
		for (; r + 2 <= r1; r += 2) VD(i256_2_##NAME)(w, rb, a, r, y, ldy, p, accs);                     \
		if (r < r1) VD(i256_1_##NAME)(w, rb, a, r, y, ldy, p, accs);                                     \
	}

VD_I256T(iq2_xxs, VD_IQ2_XXS)
VD_I256T(iq2_xs, VD_IQ2_XS)
VD_I256T(iq2_s, VD_IQ2_S)
VD_I256T(iq3_xxs, VD_IQ3_XXS)
VD_I256T(iq3_s, VD_IQ3_S)
VD_I256T(iq4_xs, VD_IQ4_XS)
VD_I256T(q2_k, VD_Q2_K)
VD_I256T(q3_k, VD_Q3_K)

#undef VD_I256T

#undef VD_AI
#undef VD_UNROLL

#undef VD_ROWS32
#undef VD_ROWS32X4
#undef VD_ROWS32T
#undef VD_P32_PREP
#undef VD_ROWS256
#undef VD_ROWS256X4

// ---- float weights against float activations. ----

// ld8: eight weights of the row's float type at index j, widened to float32.
static inline VD_T __m256 VD(ld8)(int type, const uint8_t *w, int64_t j) {
	switch (type) {
	case VD_F16:
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * j)));
	case VD_BF16:
		return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(w + 2 * j))), 16));
	}
	return _mm256_loadu_ps((const float *)(w + 4 * j));
}

static inline VD_T float VD(ld1)(int type, const uint8_t *w, int64_t j) {
	switch (type) {
	case VD_F16:
		return VD(f16)(w + 2 * j);
	case VD_BF16: {
		uint16_t h;
		memcpy(&h, w + 2 * j, 2);
		return vd_bf16(h);
	}
	}
	float f;
	memcpy(&f, w + 4 * j, 4);
	return f;
}

#define VD_ROWSF(NAME, TYPE)                                                                             \
	static VD_T void VD(mm_##NAME)(const uint8_t *w, int64_t rb, const vd_act *a, float *y, int64_t ldy,  \
	                               int64_t r0, int64_t r1) {                                              \
		const int64_t n = a->cols;                                                                       \
		for (int64_t r = r0; r < r1; r++) {                                                              \
			const uint8_t *row = w + r * rb;                                                             \
			for (int64_t i = 0; i < a->n; i++) {                                                         \
				const float *x = a->f + i * n;                                                           \
				__m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;                              \
				int64_t j = 0;                                                                           \
				for (; j + 32 <= n; j += 32) {                                                           \
					s0 = _mm256_fmadd_ps(VD(ld8)(TYPE, row, j), _mm256_loadu_ps(x + j), s0);             \
					s1 = _mm256_fmadd_ps(VD(ld8)(TYPE, row, j + 8), _mm256_loadu_ps(x + j + 8), s1);     \
					s2 = _mm256_fmadd_ps(VD(ld8)(TYPE, row, j + 16), _mm256_loadu_ps(x + j + 16), s2);   \
					s3 = _mm256_fmadd_ps(VD(ld8)(TYPE, row, j + 24), _mm256_loadu_ps(x + j + 24), s3);   \
				}                                                                                        \
				for (; j + 8 <= n; j += 8) s0 = _mm256_fmadd_ps(VD(ld8)(TYPE, row, j), _mm256_loadu_ps(x + j), s0); \
				float s = VD(hsum)(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));        \
				for (; j < n; j++) s += VD(ld1)(TYPE, row, j) * x[j];                                   \
				y[i * ldy + r] = s;                                                                      \
			}                                                                                            \
		}                                                                                                \
	}

VD_ROWSF(f32, VD_F32)
VD_ROWSF(f16, VD_F16)
VD_ROWSF(bf16, VD_BF16)

#undef VD_ROWSF

// ---- activation quantisation (Activations.Set): the same float32 operations as the Go
// path (amax, d = amax/127, id = 127/amax, round half to even), so both give equal bytes. ----

static inline VD_T int VD(hsum_i32)(__m256i v) {
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
	return _mm_cvtsi128_si32(s);
}

// quantize: nb blocks of bsz (32 or 256) values; sums per 32 values (bsz 32) or per 16.
static VD_T void VD(quantize)(const float *x, int64_t nb, int bsz, int8_t *q, float *d, int16_t *sums) {
	const __m256 sign = _mm256_set1_ps(-0.0f);
	const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	for (int64_t b = 0; b < nb; b++) {
		const float *xb = x + b * bsz;
		__m256 mx = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
		for (int j = 0; j < bsz; j += 8) {
			const __m256 v = _mm256_loadu_ps(xb + j);
			mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v));
			bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
		}
		__m128 m = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
		m = _mm_max_ps(m, _mm_movehl_ps(m, m));
		m = _mm_max_ss(m, _mm_movehdup_ps(m));
		const float amax = _mm_cvtss_f32(m);
		int8_t *qb = q + b * bsz;
		int16_t *sb = bsz == 32 ? sums + b : sums + b * (bsz / 16);
		const int nonfinite = _mm256_movemask_ps(bad) != 0 || amax > 3.40282346638528859811704183484516925440e+38f;
		if (nonfinite || amax < 1e-30f) { // as vdQuantizeBlock: NaN scale, or a zero block
			const uint32_t nan = 0x7fc00000u;
			float f = 0;
			if (nonfinite) memcpy(&f, &nan, 4);
			d[b] = f;
			memset(qb, 0, (size_t)bsz);
			memset(sb, 0, sizeof(int16_t) * (size_t)(bsz == 32 ? 1 : bsz / 16));
			continue;
		}
		d[b] = amax / 127;
		const __m256 id = _mm256_set1_ps(127 / amax);
		for (int j = 0; j < bsz; j += 32) {
			const __m256i v0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + j), id));
			const __m256i v1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + j + 8), id));
			const __m256i v2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + j + 16), id));
			const __m256i v3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + j + 24), id));
			const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v0, v1), _mm256_packs_epi32(v2, v3));
			_mm256_storeu_si256((__m256i *)(qb + j), _mm256_permutevar8x32_epi32(p, order));
			if (bsz == 32) {
				sb[0] = (int16_t)VD(hsum_i32)(_mm256_add_epi32(_mm256_add_epi32(v0, v1), _mm256_add_epi32(v2, v3)));
			} else {
				sb[j / 16] = (int16_t)VD(hsum_i32)(_mm256_add_epi32(v0, v1));
				sb[j / 16 + 1] = (int16_t)VD(hsum_i32)(_mm256_add_epi32(v2, v3));
			}
		}
	}
}

// run: the kernel for one GGML type id at this level; -1 when there is none.
static VD_T int VD(run)(int type, const uint8_t *w, int64_t rb, const vd_act *a, float *y, int64_t ldy, int64_t r0,
                        int64_t r1) {
	switch (type) {
	case VD_F32: VD(mm_f32)(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_F16: VD(mm_f16)(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_BF16: VD(mm_bf16)(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_Q4_0: (a->n > 1 ? VD(mmt_q4_0) : VD(mm_q4_0))(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_Q4_1: (a->n > 1 ? VD(mmx_q4_1) : VD(mm_q4_1))(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_Q5_0: (a->n > 1 ? VD(mmt_q5_0) : VD(mm_q5_0))(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_Q5_1: (a->n > 1 ? VD(mmx_q5_1) : VD(mm_q5_1))(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_Q8_0: (a->n > 1 ? VD(mmt_q8_0) : VD(mm_q8_0))(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_IQ4_NL: (a->n > 1 ? VD(mmt_iq4_nl) : VD(mm_iq4_nl))(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_MXFP4: (a->n > 1 ? VD(mmt_mxfp4) : VD(mm_mxfp4))(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_Q2_K: (a->n >= VD_I256_MIN ? VD(mmt_q2_k) : VD(mm_q2_k))(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_Q3_K: (a->n >= VD_I256_MIN ? VD(mmt_q3_k) : VD(mm_q3_k))(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_Q4_K: VD(mmt_q4_k)(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_Q5_K: VD(mmt_q5_k)(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_Q6_K: VD(mmt_q6_k)(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_IQ4_XS: (a->n >= VD_I256_MIN ? VD(mmt_iq4_xs) : VD(mm_iq4_xs))(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_IQ2_XXS: (a->n >= VD_I256_MIN ? VD(mmt_iq2_xxs) : VD(mm_iq2_xxs))(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_IQ2_XS: (a->n >= VD_I256_MIN ? VD(mmt_iq2_xs) : VD(mm_iq2_xs))(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_IQ2_S: (a->n >= VD_I256_MIN ? VD(mmt_iq2_s) : VD(mm_iq2_s))(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_IQ3_XXS: (a->n >= VD_I256_MIN ? VD(mmt_iq3_xxs) : VD(mm_iq3_xxs))(w, rb, a, y, ldy, r0, r1); return 0;
	case VD_IQ3_S: (a->n >= VD_I256_MIN ? VD(mmt_iq3_s) : VD(mm_iq3_s))(w, rb, a, y, ldy, r0, r1); return 0;
	}
	return -1;
}
