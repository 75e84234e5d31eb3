//! Numbers as people say them: the one spoken-number parser (cardinals,
//! ordinals, fractions, decimals, digits), a leaf that `tree/` and
//! `tools/` both use. (Being filled in by issue 16, point 3.)
