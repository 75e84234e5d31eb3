//! earshot as an ESPHome voice satellite inside `earshot run` (`[esphome]
//! serve`). (Being written: issue 22.)
