mod engine;
mod layers;
mod ftl_physics;
