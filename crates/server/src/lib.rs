//! neardup-server (under construction).
