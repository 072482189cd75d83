mod engine;
mod fio_goldens;
mod ftl_physics;
mod layers;
mod sets;
mod tenants;
