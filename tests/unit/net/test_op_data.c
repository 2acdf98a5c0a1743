/*
 * user_data of a task's operations (net/src/loop.h, net_op_data): a slot
 * and a generation, never a stack address, so that a stale completion or
 * cancel cannot be taken for a newer operation of a reused slot.
 */
#include <criterion/criterion.h>

#include "net/src/loop.h"

static uint32_t slot_of(uint64_t data)
{
    return (uint32_t)(data >> NET_SLOT_SHIFT) & ((1u << NET_SLOT_BITS) - 1);
}

Test(op_data, round_trips_slot_and_generation)
{
    const uint32_t slots[] = {0, 1, 255, 256, (1u << NET_SLOT_BITS) - 1};
    const uint32_t gens[] = {1, 2, 0x7fffffffu, 0xffffffffu};
    for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++)
        for (size_t j = 0; j < sizeof(gens) / sizeof(gens[0]); j++) {
            uint64_t d = net_op_data(slots[i], gens[j]);
            cr_expect_eq(d & NET_TAG_MASK, (uint64_t)NET_TAG_OP);
            cr_expect_eq(slot_of(d), slots[i]);
            cr_expect_eq((uint32_t)(d >> NET_GEN_SHIFT), gens[j]);
            cr_expect_neq(d, 0, "0 means nothing waits for the completion");
        }
}

Test(op_data, another_generation_of_the_same_slot_never_matches)
{
    /* The same slot (a stack reused by the next task) with the next
     * generation: a cancel by the old user_data cannot name the new one. */
    cr_expect_neq(net_op_data(7, 41), net_op_data(7, 42));
    cr_expect_neq(net_op_data(7, 0xffffffffu), net_op_data(7, 1), "at the wrap");
    cr_expect_neq(net_op_data(7, 5), net_op_data(8, 5));
}
