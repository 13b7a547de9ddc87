//! One IKE SA's state machine. Owner: helper "ike-sa".
