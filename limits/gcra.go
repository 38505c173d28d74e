package limits

// AlgGCRA is the Generic Cell Rate Algorithm: one String key (keys.Admission)
// holds TAT, the theoretical arrival time in unix µs. With the emission
// interval T = ⌈Period / Limit⌉ µs and the burst tolerance τ = Burst × T, a
// request of n units at now
//
//	TAT' = max(TAT, now) + n × T
//	passes when TAT' − now ≤ τ, and then TAT := TAT', PX TTL = TAT' − now
//
// so Burst units may pass at once from idle and Limit per Period in the long
// run. Remaining = ⌊(τ − (TAT − now)) / T⌋; RetryAfter on refusal is
// TAT' − τ − now, or Never when n > Burst. Example: Limit 1, Period 1s,
// Burst 5 gives T = 1 s and τ = 5 s; requests at 10.0, 11.0, 4 × 12.0 and
// 12.1 s pass and leave TAT = 17.0 s with a TTL of 4.9 s, and the next one at
// 12.1 s is refused without a write.
//
// T is rounded up to whole µs, so the rate errs low by under 1 µs per unit.
const AlgGCRA Algorithm = "gcra"
