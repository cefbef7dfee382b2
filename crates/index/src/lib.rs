//! neardup-index (under construction).
